"""Supervision of real runs: fail fast, stop cleanly, never leave a process."""

import os
import signal
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


def test_ctrl_c_saves_checkpoints_and_leaves_no_process(workdir):
  run_dir = os.path.join(workdir, 'interrupted')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            '--progress_every=1',
                            f'--workdir={workdir}', '--run_name=interrupted')
  wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
  pids = node_pids(run_dir)

  # While it runs, the run directory is taken.
  second = run_launcher('--config=smoke', f'--workdir={workdir}',
                        '--run_name=interrupted')
  assert second.returncode == 2
  assert 'is in use' in second.stderr

  launcher.send_signal(signal.SIGINT)
  interrupted_at = time.time()
  stdout, _ = launcher.communicate(timeout=60)
  assert time.time() - interrupted_at < 30
  assert launcher.returncode == 130
  assert alive(pids.values()) == []
  for component in ('learner', 'counter'):
    assert os.path.isfile(os.path.join(run_dir, 'checkpoints', component, 'checkpoint'))
  # Not a terminal: plain progress lines.
  assert 'progress: actor steps' in stdout
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'interrupted'
  for field in ('actor_steps', 'learner_steps', 'wall_time_seconds',
                'env_steps_per_second', 'last_eval_return', 'exit_reason'):
    assert field in summary


def test_max_wall_time_stops_the_run(workdir):
  result = run_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                        '--max_wall_time=25', f'--workdir={workdir}',
                        '--run_name=timed')
  assert result.returncode == 0, result.stderr[-2000:]
  summary = read_json(os.path.join(workdir, 'timed', 'summary.json'))
  assert summary['exit_reason'] == 'max_wall_time'
  assert summary['wall_time_seconds'] < 60


def test_plot_command_writes_png_files(workdir):
  result = run_launcher('--config=smoke', '--config.max_actor_steps=3000',
                        f'--workdir={workdir}', '--run_name=plotted')
  assert result.returncode == 0, result.stderr[-2000:]
  run_dir = os.path.join(workdir, 'plotted')
  import subprocess
  import sys
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
