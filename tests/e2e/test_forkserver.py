"""--node_start: real runs whose node processes are forked from one fork
server (acme_launch/node/forkserver.py; the default), and one whose nodes
are each a fresh Python (exec; its two actors batched, stepping four
environments each, actor/1 with settings of its own)."""

import os
import signal
import time

import psutil

from tests.conftest import (actor_steps, alive, killed_on_exit, node_records,
                            read_json, run_launcher, start_launcher,
                            wait_for)
from tests.e2e.test_launch_e2e import (
    EXPECTED_NODES, _assert_trained_to_budget,
    assert_each_node_received_its_planned_resources)



# Forked nodes (the default) train to the budget, each with settings of its
# own: test_launch_e2e.py's shared local_mp run is that run.


def test_node_start_exec_starts_every_node_as_a_fresh_python_with_its_planned_resources_and_batched_actors_reach_the_budget(
    workdir):
  # One run for three things of their own: exec'd nodes; each node process
  # receives its planned resources, actor/1 settings of its own; actors that
  # step four environments each (test_launch_e2e.py's runs once).
  result = run_launcher(
      '--config=smoke', '--node_start=exec', '--config.num_actors=2',
      '--config.envs_per_actor=4', '--config.max_actor_steps=8000',
      '--config.resources.node_overrides='
      'actor/1:omp_threads=1;actor/1:intra_op_threads=1',
      f'--workdir={workdir}', '--run_name=execd')
  run_dir = os.path.join(workdir, 'execd')
  assert result.returncode == 0, result.stderr[-3000:]
  summary = _assert_trained_to_budget(run_dir)
  records = node_records(run_dir)
  assert len(records) == len(EXPECTED_NODES) + 1  # Two actors.
  # Every node is a child of the launcher itself; no fork server ran.
  assert len({record['parent_pid'] for record in records.values()}) == 1
  assert len({record['pid'] for record in records.values()}) == len(records)
  assert not os.path.exists(os.path.join(run_dir, 'logs', 'forkserver.log'))
  # Per-node placement in real processes: actor/1 gets its own settings.
  plan = assert_each_node_received_its_planned_resources(run_dir)
  labels = {p['node']: p['label'] for p in plan}
  assert labels['actor/0'] != labels['actor/1']  # Split under two labels.
  actor_1, actor_0 = records['actor/1'], records['actor/0']
  assert actor_1['env']['OMP_NUM_THREADS'] == '1'
  assert actor_1['tf_intra_op_threads'] == 1
  assert 'OMP_NUM_THREADS' not in actor_0['env']
  assert actor_0['tf_intra_op_threads'] == 0  # TF's default: all cores.
  # Batched: four environments of 100-step episodes end four at a time.
  assert summary['actor_steps'] >= 8000 and summary['learner_steps'] > 0
  assert summary['actor_episodes'] >= 80
  assert summary['evaluator_episodes'] >= 1


def test_forked_actor_killed_is_restarted_run_dir_in_use_and_ctrl_c_saves_checkpoints_and_leaves_no_process(
    workdir):
  """Also the default supervision's Ctrl-C (once test_supervision.py's own
  run): a second launch on the run directory is refused while it runs;
  Ctrl-C exits 130 with checkpoints saved, a full summary, plain progress
  lines (not a terminal) and no process left."""
  run_dir = os.path.join(workdir, 'forked_kill')
  # The learner alone pinned: its OMP_NUM_THREADS=1 is read when numpy
  # loads, so it is exec'd; the other nodes are forked.
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            '--config.resources.learner.cpus=1',
                            '--node_start=fork', '--max_node_restarts=1',
                            '--progress_every=1',
                            f'--workdir={workdir}', '--run_name=forked_kill')
  try:
    wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
    records = node_records(run_dir)
    server_pid = records['actor/0']['parent_pid']
    assert 'acme_launch.node.forkserver' in ' '.join(
        psutil.Process(server_pid).cmdline())
    assert {records[n]['parent_pid'] for n in (
        'replay/0', 'counter/0', 'evaluator/0')} == {server_pid}
    assert records['learner/0']['parent_pid'] == launcher.pid
    assert records['learner/0']['cpu_affinity'] == '0'
    with open(os.path.join(run_dir, 'logs', 'learner_0.log')) as f:
      assert ('started by exec, not forked: its OMP_NUM_THREADS differ '
              "from the fork server's") in f.read()

    # While it runs, the run directory is taken.
    second = run_launcher('--config=smoke', f'--workdir={workdir}',
                          '--run_name=forked_kill')
    assert second.returncode == 2
    assert 'is in use' in second.stderr

    killed = records['actor/0']['pid']
    os.kill(killed, signal.SIGKILL)
    # The restarted actor is forked again, by the same fork server.
    restarted = wait_for(
        lambda: (node_records(run_dir)['actor/0']
                 if node_records(run_dir)['actor/0']['pid'] != killed
                 else None), 120, 'the restarted actor')
    assert restarted['parent_pid'] == server_pid
    assert restarted['env']['ACME_LAUNCH_NODE_RESTART'] == '1'
    steps = actor_steps(run_dir)
    wait_for(lambda: actor_steps(run_dir) > steps, 120,
             'actor steps after the restart')
    pids = [r['pid'] for r in node_records(run_dir).values()]
    launcher.send_signal(signal.SIGINT)
    interrupted_at = time.time()
    stdout, stderr = launcher.communicate(timeout=60)
  finally:
    if launcher.poll() is None:
      launcher.kill()
  assert time.time() - interrupted_at < 40
  assert launcher.returncode == 130, stderr[-3000:]
  assert 'node actor/0 was killed by signal 9; restarting it' in stdout
  assert alive([*pids, server_pid]) == []
  for component in ('learner', 'counter'):
    assert os.path.isfile(os.path.join(run_dir, 'checkpoints', component,
                                       'checkpoint'))
  # Not a terminal: plain progress lines.
  assert 'progress: actor steps' in stdout
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'interrupted'
  for field in ('actor_steps', 'learner_steps', 'wall_time_seconds',
                'env_steps_per_second', 'last_eval_return', 'exit_reason'):
    assert field in summary


def test_the_fork_server_killed_stops_the_run_and_names_it(workdir):
  run_dir = os.path.join(workdir, 'server_killed')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            '--node_start=fork', f'--workdir={workdir}',
                            '--run_name=server_killed')
  try:
    wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
    records = node_records(run_dir)
    server_pid = records['actor/0']['parent_pid']
    os.kill(server_pid, signal.SIGKILL)
    killed_at = time.time()
    stdout, stderr = launcher.communicate(timeout=60)
  finally:
    if launcher.poll() is None:
      launcher.kill()
  assert time.time() - killed_at < 30
  assert launcher.returncode == 1
  assert 'node forkserver failed' in stderr + stdout
  assert 'the fork server (--node_start=fork)' in stderr + stdout
  assert read_json(os.path.join(run_dir, 'summary.json'))[
      'failed_node'] == 'forkserver'
  # Its nodes died with it (PR_SET_PDEATHSIG).
  assert alive([r['pid'] for r in records.values()] + [server_pid]) == []


def _fork_servers_of(pid: int) -> set:
  """The fork servers that process `pid` started and that run now."""
  try:
    children = psutil.Process(pid).children()
  except psutil.NoSuchProcess:
    return set()
  found = set()
  for child in children:
    try:
      if 'acme_launch.node.forkserver' in ' '.join(child.cmdline()):
        found.add(child.pid)
    except psutil.NoSuchProcess:
      pass
  return found


def test_an_input_refused_after_the_fork_server_started_leaves_nothing(
    workdir):
  # The replay check comes after the fork server's early start (the program
  # must be built to size the replay): refused, the server stops first.
  launcher = start_launcher('--config=r2d2_atari',
                            '--config.r2d2.max_replay_size=10000000',
                            f'--workdir={workdir}', '--run_name=refused')
  servers = set()
  with killed_on_exit(launcher):
    deadline = time.time() + 300
    while launcher.poll() is None and time.time() < deadline:
      servers |= _fork_servers_of(launcher.pid)  # Its own, while it runs.
      time.sleep(0.05)
    stdout, stderr = launcher.communicate(timeout=60)
  assert launcher.returncode == 2, stderr[-3000:]
  lines = stderr.strip().splitlines()
  assert len(lines) == 1 and 'the replay node would need about' in lines[0]
  assert not os.path.exists(os.path.join(workdir, 'refused'))
  assert len(servers) == 1  # It had started...
  assert alive(servers) == []  # ...and is gone.
