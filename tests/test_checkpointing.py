"""Checkpoints and resume, on real runs of the smoke config.

One run directory goes through a sequence, each step a test that depends on
the one before: run to budget A, refuse bad resumes, resume to budget B,
then survive a corrupt newest checkpoint, then refuse when none is readable.
"""

import glob
import os
import signal

import pytest

from tests.conftest import (actor_steps, read_json, run_launcher,
                            start_launcher, wait_for)

BUDGET_A, BUDGET_B = 3000, 6000


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('runs') / 'resumed')


def _launch(run_dir, *args):
  return run_launcher('--config=smoke', f'--resume={run_dir}', *args)


def _learner_checkpoints(run_dir):
  return sorted(glob.glob(os.path.join(run_dir, 'checkpoints', 'learner', 'ckpt-*.index')))


def test_1_first_run_saves_learner_counter_and_replay(run_dir):
  result = run_launcher('--config=smoke', f'--config.max_actor_steps={BUDGET_A}',
                        f'--workdir={os.path.dirname(run_dir)}', '--run_name=resumed')
  assert result.returncode == 0, result.stderr[-2000:]
  assert len(_learner_checkpoints(run_dir)) == 1
  assert glob.glob(os.path.join(run_dir, 'checkpoints', 'counter', 'ckpt-*.index'))
  assert glob.glob(os.path.join(run_dir, 'checkpoints', 'replay', '*', 'DONE'))


def test_2_budget_already_met_exits_zero_without_starting(run_dir):
  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_A}')
  assert result.returncode == 0, result.stderr
  assert 'nothing to do' in result.stdout
  assert len(_learner_checkpoints(run_dir)) == 1


def test_3_resume_with_another_environment_is_refused(run_dir):
  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_B}',
                   '--config.env_name=Hopper-v4')
  assert result.returncode == 2
  assert 'env_name' in result.stderr and 'Traceback' not in result.stderr


def test_4_resume_continues_steps_and_restores_exact_parameters(run_dir):
  first = read_json(os.path.join(run_dir, 'summary.json'))
  saved_digest = open(_learner_checkpoints(run_dir)[-1].replace('.index', '.digest')).read()

  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_B}')

  assert result.returncode == 0, result.stderr[-2000:]
  assert 'resuming from' in result.stdout
  second = read_json(os.path.join(run_dir, 'summary.json'))
  assert second['restored_actor_steps'] >= first['actor_steps'] >= BUDGET_A
  assert second['actor_steps'] >= BUDGET_B
  assert second['learner_steps'] > first['learner_steps']   # Not from 0.
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert restore['checkpoint'].endswith('ckpt-1')
  assert restore['digest'] == saved_digest
  assert len(_learner_checkpoints(run_dir)) == 2


def test_5_truncated_newest_checkpoint_falls_back_with_a_warning(run_dir):
  newest = _learner_checkpoints(run_dir)[-1].replace('.index', '')
  data_files = sorted(glob.glob(newest + '.data-*'))
  for path in data_files:
    with open(path, 'r+b') as f:
      f.truncate(max(os.path.getsize(path) // 2, 1))

  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_B}')

  assert result.returncode == 0, result.stderr[-2000:]
  warnings = [l for l in result.stderr.splitlines() if 'warning:' in l]
  assert len(warnings) == 1 and 'learner checkpoint unreadable' in warnings[0]
  assert 'ckpt-1' in warnings[0]
  # The damaged files are kept; the state file now points at the good one.
  assert all(os.path.exists(p) for p in data_files)
  state = open(os.path.join(run_dir, 'checkpoints', 'learner', 'checkpoint')).read()
  assert 'model_checkpoint_path: "ckpt-1"' in state


def test_6_no_readable_checkpoint_is_one_line_and_exit_2(run_dir):
  for index in _learner_checkpoints(run_dir):
    with open(index, 'wb') as f:
      f.write(b'not a checkpoint')
  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_B * 2}')
  assert result.returncode == 2
  errors = [l for l in result.stderr.splitlines() if 'acme-launch: error:' in l]
  assert len(errors) == 1
  assert 'no readable learner checkpoint' in errors[0]
  assert 'Traceback' not in result.stderr


def test_sigterm_leaves_a_checkpoint_that_resumes(workdir):
  run_dir = os.path.join(workdir, 'terminated')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            f'--workdir={workdir}', '--run_name=terminated')
  wait_for(lambda: actor_steps(run_dir) >= 1000, 180, '1000 actor steps')
  launcher.send_signal(signal.SIGTERM)
  launcher.communicate(timeout=60)
  assert launcher.returncode == 143
  stopped_at = read_json(os.path.join(run_dir, 'summary.json'))['actor_steps']

  result = run_launcher('--config=smoke', f'--resume={run_dir}',
                        f'--config.max_actor_steps={stopped_at + 1500}')

  assert result.returncode == 0, result.stderr[-2000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['restored_actor_steps'] >= stopped_at
  assert os.path.isfile(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
