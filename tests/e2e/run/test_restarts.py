"""Runs that last: restarted actors, whole-program resumes, capped logs,
the disk-space guard, and a chaos run with actors killed at random
(the restart policy and seeds in process: tests/run/test_restarts.py)."""

import contextlib
import csv
import glob
import os
import random
import signal
import subprocess
import time

import pytest

from acme_launch.plan import node_env
from tests.conftest import (actor_steps, alive, killed_on_exit, node_pids,
                            read_json, run_launcher, start_launcher,
                            wait_for)


FAULTY = '--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4'


def test_a_killed_actor_is_restarted_and_the_run_reaches_its_budget(workdir):
  run_dir = os.path.join(workdir, 'restart')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=5000',
                            f'--workdir={workdir}', '--run_name=restart')
  with killed_on_exit(launcher):
    wait_for(lambda: actor_steps(run_dir) >= 500, 180, 'actor steps')
    first_pid = node_pids(run_dir)['actor/0']
    os.kill(first_pid, signal.SIGKILL)
    stdout, stderr = launcher.communicate(timeout=240)
  assert launcher.returncode == 0, stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['node_restarts'] == {'actor/0': 1}
  record = read_json(os.path.join(run_dir, 'nodes', 'actor_0.json'))
  assert record['pid'] != first_pid
  assert record['env'][node_env.variable('restart')] == '1'
  assert 'restarting it (1 of at most 3)' in stdout
  with open(os.path.join(run_dir, 'logs', 'actor_0.log')) as f:
    assert 'killed by signal 9; restarting it' in f.read()


def test_past_its_restart_limit_a_failing_actor_stops_the_run(workdir):
  # actor/1's environment raises at its step 201, in every incarnation.
  result = run_launcher(
      '--config=smoke', '--config.max_actor_steps=10000000',
      '--config.num_actors=2', '--max_node_restarts=1', FAULTY,
      '--config.resources.node_overrides='
      'actor/1:extra_env=ACME_TEST_RAISE_AFTER_STEPS=200',
      f'--workdir={workdir}', '--run_name=limit', timeout=300)
  assert result.returncode == 1, result.stderr[-3000:]
  summary = read_json(os.path.join(workdir, 'limit', 'summary.json'))
  assert summary['failed_node'] == 'actor/1'
  assert summary['node_restarts'] == {'actor/1': 1}
  assert 'restarted 1 times already' in result.stderr
  assert alive(node_pids(os.path.join(workdir, 'limit')).values()) == []


def test_a_killed_learner_with_auto_resume_resumes_and_finishes(workdir):
  run_dir = os.path.join(workdir, 'resume')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=5000',
                            '--config.checkpoint.interval_minutes=0.02',
                            '--auto_resume=1', f'--workdir={workdir}',
                            '--run_name=resume')
  with killed_on_exit(launcher):
    learner_dir = os.path.join(run_dir, 'checkpoints', 'learner')
    # A save is complete once TF's `checkpoint` state file names it (it is
    # written after the save's own files): killed before that, there is
    # nothing to resume from.
    wait_for(lambda: os.path.isfile(os.path.join(learner_dir, 'checkpoint'))
             and glob.glob(os.path.join(learner_dir, 'ckpt-*.index')),
             180, 'a learner checkpoint')
    os.kill(node_pids(run_dir)['learner/0'], signal.SIGKILL)
    _, stderr = launcher.communicate(timeout=300)
  assert launcher.returncode == 0, stderr[-3000:]
  assert '--auto_resume: 1 of 1' in stderr
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['auto_resumes'] == 1
  # The second attempt started from the first one's learner checkpoint.
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert os.path.basename(restore['checkpoint']).startswith('ckpt-')


def test_a_chatty_node_log_is_capped_by_rotation(workdir):
  result = run_launcher(
      '--config=smoke', '--config.max_actor_steps=3000', FAULTY,
      '--config.resources.node_overrides='
      'actor/0:extra_env=ACME_TEST_PRINT_BYTES_PER_STEP=200',
      '--node_log_max_mb=0.05', f'--workdir={workdir}', '--run_name=chatty')
  assert result.returncode == 0, result.stderr[-3000:]
  logs = sorted(glob.glob(os.path.join(workdir, 'chatty', 'logs', 'actor_0.log*')))
  names = [os.path.basename(p) for p in logs]
  # 3,000 steps x 200 bytes = 600 kB written; 4 files of 50 kB kept.
  assert names == ['actor_0.log', 'actor_0.log.1', 'actor_0.log.2', 'actor_0.log.3']
  assert all(os.path.getsize(p) <= 0.05 * 2**20 for p in logs)
  assert sum(os.path.getsize(p) for p in logs) > 0.1 * 2**20


@contextlib.contextmanager
def _tmpfs(path, size):
  if os.geteuid() != 0:
    pytest.skip('mounting a small tmpfs needs root')
  os.makedirs(path, mode=0o700, exist_ok=True)
  if subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size},mode=0700',
                     'tmpfs', path], capture_output=True,
                    check=False).returncode:
    pytest.skip('cannot mount a tmpfs here')
  try:
    yield path
  finally:
    subprocess.run(['umount', '-l', path], check=False)


def test_too_little_free_space_refuses_to_start_in_one_line(workdir):
  with _tmpfs(os.path.join(workdir, 'small'), '8m') as small:
    result = run_launcher('--config=smoke', f'--workdir={small}',
                          '--run_name=r')
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and 'MB free on the filesystem of' in lines[0], lines
    assert small in lines[0]


def test_a_filling_disk_stops_the_run_with_its_checkpoints_saved(workdir):
  with _tmpfs(os.path.join(workdir, 'disk'), '96m') as disk:
    run_dir = os.path.join(disk, 'run')
    launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                              f'--workdir={disk}', '--run_name=run')
    with killed_on_exit(launcher):
      wait_for(lambda: actor_steps(run_dir) >= 500, 180, 'actor steps')
      # Leave about 40 MB: under the 64 MB guard, room for checkpoints.
      filler = os.path.join(disk, 'filler')
      free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
      with open(filler, 'wb') as f:
        f.write(b'\0' * max(free - 40 * 2**20, 0))
      _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 1, stderr[-3000:]
    assert 'MB free on the filesystem of' in stderr
    summary = read_json(os.path.join(run_dir, 'summary.json'))
    assert summary['exit_reason'] == 'low_disk_space'
    assert glob.glob(os.path.join(run_dir, 'checkpoints', 'learner', 'ckpt-*.index'))
    assert glob.glob(os.path.join(run_dir, 'checkpoints', 'counter', 'ckpt-*.index'))


def test_chaos_actors_killed_at_random_the_counts_stay_exact(workdir):
  """Two actors are SIGKILLed four times at random moments.

  Smoke episodes are exactly 100 steps (HalfCheetah never terminates) and an
  actor reports an episode's steps and the episode together, once, when it
  ends: a killed actor's unfinished episode is never counted and a restarted
  one counts only its own. So, whatever the kills, the counter's actor steps
  are exactly 100 x its episodes, and its totals never go backwards.
  """
  run_dir = os.path.join(workdir, 'chaos')
  # Kills at 5, 10, 15 and 20% of a budget the run cannot reach before the
  # fourth restart, however fast it steps: while an actor restarts (seconds)
  # the other one keeps stepping.
  budget = 80000
  launcher = start_launcher('--config=smoke', f'--config.max_actor_steps={budget}',
                            '--config.num_actors=2', '--max_node_restarts=10',
                            f'--workdir={workdir}', '--run_name=chaos')
  rng = random.Random(7)
  killed = []
  with killed_on_exit(launcher):
    for k in range(4):
      wait_for(lambda k=k: actor_steps(run_dir) >= budget * (k + 1) // 20 or
               launcher.poll() is not None, 300, 'actor steps')
      # Both actors up again (a restarted one has recorded its new pid; on a
      # loaded machine its imports alone can take a minute).
      wait_for(lambda: all(node_pids(run_dir)[n] not in killed
                           for n in ('actor/0', 'actor/1')) or
               launcher.poll() is not None, 300, 'restarted actors')
      assert launcher.poll() is None, launcher.communicate()[1][-3000:]
      time.sleep(rng.uniform(0.0, 2.0))
      pid = node_pids(run_dir)[rng.choice(['actor/0', 'actor/1'])]
      os.kill(pid, signal.SIGKILL)
      killed.append(pid)
    _, stderr = launcher.communicate(timeout=900)
  assert launcher.returncode == 0, stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['node_restarts_total'] == len(killed) == 4
  counts = read_json(os.path.join(run_dir, 'progress.json'))['counts']
  assert counts['actor_steps'] >= budget
  assert counts['actor_steps'] == 100 * counts['actor_episodes']
  with open(os.path.join(run_dir, 'metrics', 'progress.csv'), newline='') as f:
    history = [float(row['actor_steps']) for row in csv.DictReader(f)]
  assert history == sorted(history)
  assert history[-1] >= budget  # The budget's totals always get their row.
  assert alive(list(node_pids(run_dir).values()) + killed) == []
