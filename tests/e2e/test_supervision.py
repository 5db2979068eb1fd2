"""Supervision of real runs: fail fast, stop cleanly, never leave a process."""

import os
import shutil
import signal
import subprocess
import sys
import time

from tests.conftest import (actor_steps, alive, node_pids, read_json,
                            run_launcher, start_launcher, wait_for)
from tests.e2e.conftest import temp_folder



def test_kill_9_of_an_actor_without_restarts_stops_the_run_and_names_it(workdir):
  run_dir = os.path.join(workdir, 'killed')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            '--max_node_restarts=0',
                            f'--workdir={workdir}', '--run_name=killed')
  wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
  pids = node_pids(run_dir)
  os.kill(pids['actor/0'], signal.SIGKILL)
  killed_at = time.time()
  stdout, stderr = launcher.communicate(timeout=60)
  assert time.time() - killed_at < 30
  assert launcher.returncode == 1
  assert 'node actor/0 failed' in stderr
  assert 'killed by signal 9' in stderr
  assert read_json(os.path.join(run_dir, 'summary.json'))['failed_node'] == 'actor/0'
  assert alive(pids.values()) == []
  assert 'exit reason        node_failed' in stdout


# Ctrl-C (checkpoints saved, no process left, the run directory in use while
# it runs, plain progress lines, the summary's fields): on a forked run whose
# actor was killed and restarted, in test_forkserver.py.


def test_max_wall_time_stops_the_run(workdir):
  result = run_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                        '--max_wall_time=15', f'--workdir={workdir}',
                        '--run_name=timed')
  assert result.returncode == 0, result.stderr[-2000:]
  summary = read_json(os.path.join(workdir, 'timed', 'summary.json'))
  assert summary['exit_reason'] == 'max_wall_time'
  assert summary['wall_time_seconds'] < 60


def test_plot_command_writes_png_files(trained, tmp_path):
  # A copy of the session's run to BUDGET_A (tests/e2e/conftest.py), as
  # a run of its own here would be: --config=smoke to 3,000 actor steps.
  run_dir = str(tmp_path / 'plotted')
  shutil.copytree(trained, run_dir)
  # What the run itself may have plotted goes: the command writes its own.
  shutil.rmtree(os.path.join(run_dir, 'plots'), ignore_errors=True)
  plot = subprocess.run([sys.executable, '-m', 'acme_launch.plot', run_dir],
                        capture_output=True, text=True, check=False)
  assert plot.returncode == 0, plot.stderr
  for name in ('eval_return.png', 'steps_per_second.png'):
    path = os.path.join(run_dir, 'plots', name)
    with open(path, 'rb') as f:
      assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    assert os.path.getsize(path) > 5000
  # TensorBoard event files for the nodes that log.
  for node in ('actor_0', 'learner_0', 'evaluator_0', 'progress'):
    assert os.listdir(os.path.join(run_dir, 'metrics', 'tensorboard', node))


def test_kill_9_of_the_launcher_takes_every_node_with_it(workdir):
  run_dir = os.path.join(workdir, 'orphans')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            f'--workdir={workdir}', '--run_name=orphans')
  wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
  pids = node_pids(run_dir)
  assert len(pids) == 5
  launcher.kill()
  launcher.communicate(timeout=30)
  wait_for(lambda: not alive(pids.values()), 15, 'node processes to die')


def test_a_run_leaves_nothing_in_the_temp_folder(trained):
  # Its nodes end by os._exit or SIGKILL, without exit handlers: TF's
  # AutoGraph files (the checkpointer's among them) stayed in /tmp. What
  # stays is W&B's (the run is tracked): its service's empty folder.
  left = os.listdir(temp_folder(os.path.dirname(trained)))
  assert [name for name in left if not name.startswith('wandb-')] == []
