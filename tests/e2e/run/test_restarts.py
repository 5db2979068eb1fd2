"""Runs that last: restarted actors, whole-program resumes, capped logs,
the disk-space guard, and a chaos run with actors killed at random
(the restart policy and seeds in process: tests/run/test_restarts.py)."""

import collections
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


def test_an_environment_error_in_an_actor_past_its_restart_limit_is_that_actors_failure_and_stops_the_run(
    workdir):
  # actor/1's environment raises at its step 301, in every incarnation.
  run_dir = os.path.join(workdir, 'limit')
  started = time.time()
  result = run_launcher(
      '--config=smoke', '--config.max_actor_steps=10000000',
      '--config.num_actors=2', '--max_node_restarts=1', FAULTY,
      '--config.resources.node_overrides='
      'actor/1:extra_env=ACME_TEST_RAISE_AFTER_STEPS=300',
      f'--workdir={workdir}', '--run_name=limit', timeout=300)
  assert result.returncode == 1, result.stderr[-3000:]
  assert 'node actor/1 failed' in result.stderr
  assert 'injected fault: environment step 301 in node actor/1' in result.stderr
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['failed_node'] == 'actor/1'
  assert summary['exit_reason'] == 'node_failed'
  assert summary['node_restarts'] == {'actor/1': 1}
  assert 'restarted 1 times already' in result.stderr
  assert alive(node_pids(run_dir).values()) == []
  assert time.time() - started < 240


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
      '--config=smoke', '--config.max_actor_steps=2000', FAULTY,
      '--config.resources.node_overrides='
      'actor/0:extra_env=ACME_TEST_PRINT_BYTES_PER_STEP=200',
      '--node_log_max_mb=0.05', f'--workdir={workdir}', '--run_name=chatty')
  assert result.returncode == 0, result.stderr[-3000:]
  logs = sorted(glob.glob(os.path.join(workdir, 'chatty', 'logs', 'actor_0.log*')))
  names = [os.path.basename(p) for p in logs]
  # 2,000 steps x 200 bytes = 400 kB written; 4 files of 50 kB kept.
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


def test_actors_killed_at_random_are_restarted_the_counts_stay_exact_and_the_run_reaches_its_budget(
    workdir):
  """Two actors are SIGKILLed twice in all, at random moments: each killed
  actor is restarted (a new process, its restart number in its environment,
  a line in the terminal and in its log, the default limit of 3) and the run
  reaches its budget.

  Smoke episodes are exactly 100 steps (HalfCheetah never terminates) and an
  actor reports an episode's steps and the episode together, once, when it
  ends: a killed actor's unfinished episode is never counted and a restarted
  one counts only its own. So, whatever the kills, the counter's actor steps
  are exactly 100 x its episodes, and its totals never go backwards.
  """
  run_dir = os.path.join(workdir, 'chaos')
  # Kills at 1,000 and 2,000 actor steps (or once both actors are up again),
  # of a budget the run cannot reach before the second restart, however fast
  # it steps: while an actor restarts (seconds; forked) the other one keeps
  # stepping, about 500 steps/s.
  budget, kills = 15000, 2
  launcher = start_launcher('--config=smoke', f'--config.max_actor_steps={budget}',
                            '--config.num_actors=2',
                            f'--workdir={workdir}', '--run_name=chaos')
  rng = random.Random(7)
  killed = []   # (node, pid)
  with killed_on_exit(launcher):
    for k in range(kills):
      wait_for(lambda k=k: actor_steps(run_dir) >= 1000 * (k + 1) or
               launcher.poll() is not None, 300, 'actor steps')
      # Both actors up again (a restarted one has recorded its new pid; on a
      # loaded machine its imports alone can take a minute).
      wait_for(lambda: all(node_pids(run_dir)[n] not in {p for _, p in killed}
                           for n in ('actor/0', 'actor/1')) or
               launcher.poll() is not None, 300, 'restarted actors')
      assert launcher.poll() is None, launcher.communicate()[1][-3000:]
      time.sleep(rng.uniform(0.0, 2.0))
      node = rng.choice(['actor/0', 'actor/1'])
      pid = node_pids(run_dir)[node]
      os.kill(pid, signal.SIGKILL)
      killed.append((node, pid))
    stdout, stderr = launcher.communicate(timeout=600)
  assert launcher.returncode == 0, stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  per_node = collections.Counter(node for node, _ in killed)
  assert summary['node_restarts'] == dict(per_node)
  assert summary['node_restarts_total'] == len(killed) == kills
  # Each killed actor runs on as a new process that knows its restart number,
  # and the terminal and its log say so (the default limit: 3 restarts).
  killed_pids = [pid for _, pid in killed]
  for node, times in per_node.items():
    record = read_json(os.path.join(run_dir, 'nodes',
                                    node.replace('/', '_') + '.json'))
    assert record['pid'] not in killed_pids
    assert record['env'][node_env.variable('restart')] == str(times)
    with open(os.path.join(run_dir, 'logs', node.replace('/', '_') + '.log')) as f:
      assert 'killed by signal 9; restarting it' in f.read()
  assert 'restarting it (1 of at most 3)' in stdout
  counts = read_json(os.path.join(run_dir, 'progress.json'))['counts']
  assert counts['actor_steps'] >= budget
  assert counts['actor_steps'] == 100 * counts['actor_episodes']
  with open(os.path.join(run_dir, 'metrics', 'progress.csv'), newline='') as f:
    history = [float(row['actor_steps']) for row in csv.DictReader(f)]
  assert history == sorted(history)
  assert history[-1] >= budget  # The budget's totals always get their row.
  assert alive(list(node_pids(run_dir).values()) + killed_pids) == []
