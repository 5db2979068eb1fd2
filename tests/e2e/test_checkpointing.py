"""Checkpoints and resume, on real runs of the smoke config.

Two runs are made once per session (tests/e2e/conftest.py): `trained` (a
run to budget A) and `resumed` (a copy of it resumed to budget B, so two
learner checkpoints). Each test works on its own copy of one of them, so
any test runs alone (`-k`) or in any order.
"""

import glob
import os
import shutil
import signal

import pytest

from tests.conftest import (actor_steps, read_json, run_launcher,
                            start_launcher, wait_for)
from tests.e2e.conftest import (BUDGET_A, BUDGET_B, learner_checkpoints as
                                _learner_checkpoints, resume as _launch)


def _copy(run_dir, tmp_path):
  copy = str(tmp_path / 'run')
  shutil.copytree(run_dir, copy)
  return copy


def test_first_run_saves_learner_counter_and_replay(trained):
  run_dir = trained
  assert len(_learner_checkpoints(run_dir)) == 1
  assert glob.glob(os.path.join(run_dir, 'checkpoints', 'counter', 'ckpt-*.index'))
  assert glob.glob(os.path.join(run_dir, 'checkpoints', 'replay', '*', 'DONE'))


# A budget already met (exit 0, nothing to do, no checkpoint added): with
# --allow_exposed_listeners on test_launch_e2e.py's shared run.


def test_resume_with_another_environment_is_refused(trained, tmp_path):
  run_dir = _copy(trained, tmp_path)
  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_B}',
                   '--config.env_name=Hopper-v4')
  assert result.returncode == 2
  assert 'env_name' in result.stderr and 'Traceback' not in result.stderr


@pytest.mark.parametrize('override, expected', [
    ('--config.max_actor_stepz=9000', "unknown config field in override: 'max_actor_stepz'"),
    ('--config.max_actor_steps=many', 'flag --config.max_actor_steps=many:'),
])
def test_resume_alone_with_a_bad_override_is_one_line_exit_2(
    trained, tmp_path, override, expected):
  run_dir = _copy(trained, tmp_path)
  with open(os.path.join(run_dir, 'config.json')) as f:
    before = f.read()
  result = run_launcher(f'--resume={run_dir}', override)
  assert result.returncode == 2
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and expected in lines[0], result.stderr
  with open(os.path.join(run_dir, 'config.json')) as f:
    assert f.read() == before


def test_resume_continues_steps_and_restores_exact_parameters(resumed):
  run_dir, first, saved_digest, result = resumed
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


def test_truncated_newest_checkpoint_falls_back_with_a_warning(resumed, tmp_path):
  run_dir = _copy(resumed[0], tmp_path)
  assert len(_learner_checkpoints(run_dir)) == 2
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


def test_no_readable_checkpoint_is_one_line_and_exit_2(resumed, tmp_path):
  run_dir = _copy(resumed[0], tmp_path)
  for index in _learner_checkpoints(run_dir):
    with open(index, 'wb') as f:
      f.write(b'not a checkpoint')
  result = _launch(run_dir, f'--config.max_actor_steps={BUDGET_B * 2}')
  assert result.returncode == 2
  errors = [l for l in result.stderr.splitlines() if 'acme-launch: error:' in l]
  assert len(errors) == 1
  assert 'no readable learner checkpoint' in errors[0]
  assert 'Traceback' not in result.stderr


def test_sigterm_leaves_a_checkpoint_that_resumes_alone_with_overrides_applied_to_the_saved_config(
    workdir):
  run_dir = os.path.join(workdir, 'terminated')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            f'--workdir={workdir}', '--run_name=terminated')
  wait_for(lambda: actor_steps(run_dir) >= 1000, 180, '1000 actor steps')
  launcher.send_signal(signal.SIGTERM)
  launcher.communicate(timeout=60)
  assert launcher.returncode == 143
  stopped_at = read_json(os.path.join(run_dir, 'summary.json'))['actor_steps']
  assert len(_learner_checkpoints(run_dir)) == 1
  budget = stopped_at + 1500

  # Its budget raised without naming its config again.
  result = run_launcher(f'--resume={run_dir}',
                        f'--config.max_actor_steps={budget}')

  assert result.returncode == 0, result.stderr[-2000:]
  assert 'resuming from' in result.stdout
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['restored_actor_steps'] >= stopped_at
  assert summary['actor_steps'] >= budget
  assert os.path.isfile(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['config']['max_actor_steps'] == budget
  assert saved['config_name'] == 'smoke'
  assert len(_learner_checkpoints(run_dir)) == 2
