"""The supervisor's event handling, with trivial commands.

Supervisor.run_commands runs in this process and is handed a few small
Python processes standing in for nodes (real programs: the other tests under
tests/e2e/); each test checks what it decides: a failure stops the run
naming the node, an actor is restarted with its restart number, the budget
ends the run, stop lets saving nodes finish and kills the rest, no process
is left. Each takes seconds.
"""

import os
import signal
import sys
import time

from acme_launch.plan import node_env
from acme_launch import layout
from acme_launch.run import rundir
from acme_launch.run import core
from acme_launch.run.local_mp import launch as local_mp
from tests.conftest import alive


def node(name, code):
  """(node, argv, env) running `code`; it sees its node name and run dir."""
  return name, [sys.executable, '-c', code], {}


SLEEPER = 'import time; time.sleep(60)'


def run(run_dir, commands, **options):
  rundir.create(run_dir)
  runner = local_mp.Supervisor(str(run_dir), **options)
  outcome = runner.run_commands(commands)
  pids = [child.popen.pid for child in runner._children]
  return outcome, pids


def test_a_node_exiting_non_zero_stops_the_run_naming_it(tmp_path):
  outcome, pids = run(tmp_path, [
      node('learner/0', 'import sys, time; time.sleep(0.5); '
           'print("learner: out of patience"); sys.exit(3)'),
      node('actor/0', SLEEPER)])
  assert (outcome.exit_code, outcome.reason, outcome.failed_node) == (
      core.EXIT_NODE_FAILED, 'node_failed', 'learner/0')
  assert 'learner: out of patience' in outcome.failed_log_tail
  assert 'exited with code 3' in outcome.failed_log_tail
  assert 'learner nodes are not restarted' in outcome.failed_log_tail
  assert alive(pids) == []
  with open(layout.log_path(str(tmp_path), 'learner/0')) as f:
    assert 'out of patience' in f.read()


def test_an_actor_is_restarted_with_its_restart_number_until_the_limit(tmp_path):
  seen = tmp_path / 'restarts_seen'
  outcome, pids = run(tmp_path, [
      node('actor/0', 'import os, sys; '
           f'open({str(seen)!r}, "a").write(os.environ.get('
           f'{node_env.variable("restart")!r}, "0") + "\\n"); sys.exit(1)'),
      node('learner/0', SLEEPER)], max_node_restarts=2)
  assert seen.read_text().split() == ['0', '1', '2']
  assert (outcome.reason, outcome.failed_node) == ('node_failed', 'actor/0')
  assert 'restarted 2 times already' in outcome.failed_log_tail
  assert outcome.restarts == {'actor/0': 2}
  assert alive(pids) == []


def test_the_budget_ends_the_run_with_exit_0(tmp_path):
  # What the counter's steps limiter does: progress.json says so, then
  # lp.stop() signals the launcher (here: this process) with SIGTERM.
  progress = layout.progress_path(str(tmp_path))
  counter = ('import json, os, signal, time; time.sleep(0.5); '
             f'json.dump({{"budget_reached": True}}, open({progress!r}, "w")); '
             f'os.kill({os.getpid()}, signal.SIGTERM); time.sleep(60)')
  outcome, pids = run(tmp_path, [node('counter/0', counter),
                                 node('actor/0', SLEEPER)])
  assert (outcome.exit_code, outcome.reason) == (0, 'budget_reached')
  assert alive(pids) == []


def test_stop_lets_saving_nodes_finish_and_kills_the_others(tmp_path):
  saved = tmp_path / 'saved'
  learner = ('import signal, sys, time\n'
             'def save(*_):\n'
             '  time.sleep(1.0)\n'
             f'  open({str(saved)!r}, "w").write("checkpoint")\n'
             '  sys.exit(0)\n'
             'signal.signal(signal.SIGTERM, save)\n'
             'time.sleep(60)\n')
  # An actor stuck where its signal handler never runs.
  actor = ('import signal, time; '
           'signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)')
  started = time.time()
  outcome, pids = run(tmp_path, [node('learner/0', learner),
                                 node('actor/0', actor)], max_wall_time=1.0)
  assert outcome.reason == 'max_wall_time'
  assert saved.read_text() == 'checkpoint'
  assert time.time() - started < core.STOP_TIMEOUT_SECONDS
  assert alive(pids) == []


def test_ctrl_c_ends_the_run_as_interrupted(tmp_path):
  trigger = ('import os, signal, time; time.sleep(0.5); '
             f'os.kill({os.getpid()}, signal.SIGINT); time.sleep(60)')
  before = signal.getsignal(signal.SIGINT)
  outcome, pids = run(tmp_path, [node('evaluator/0', trigger),
                                 node('actor/0', SLEEPER)])
  assert (outcome.exit_code, outcome.reason) == (core.EXIT_INTERRUPTED,
                                                 'interrupted')
  assert alive(pids) == []
  assert signal.getsignal(signal.SIGINT) is before  # Its handler is gone.


def test_nodes_that_all_finish_end_the_run(tmp_path):
  outcome, _ = run(tmp_path, [node('actor/0', 'print("done")'),
                              node('evaluator/0', 'pass')])
  assert (outcome.exit_code, outcome.reason) == (0, 'all_nodes_exited')


def test_each_node_process_has_a_private_temp_folder_gone_once_it_ends(tmp_path):
  # Each process writes into its temp folder and leaves (as TF's AutoGraph
  # files stay when a node ends by os._exit or SIGKILL); an actor started
  # three times gets three folders.
  seen = tmp_path / 'temp_folders'
  leave_a_file = ('import os, stat, sys, tempfile; '
                  'd = tempfile.gettempdir(); '
                  'tempfile.NamedTemporaryFile(delete=False).close(); '
                  f'open({str(seen)!r}, "a").write('
                  'f"{d} {stat.S_IMODE(os.stat(d).st_mode):o}\\n"); ')
  outcome, _ = run(tmp_path, [
      node('actor/0', leave_a_file + 'os._exit(1)'),
      node('learner/0', leave_a_file + 'import time; time.sleep(60)')],
      max_node_restarts=2)
  assert outcome.restarts == {'actor/0': 2}
  folders = dict(line.split() for line in seen.read_text().splitlines())
  assert len(folders) == 4  # Three actor processes and the learner.
  for folder, mode in folders.items():
    assert os.path.basename(folder).startswith('acme-launch-node-')
    assert mode == '700'
    assert not os.path.exists(folder)
