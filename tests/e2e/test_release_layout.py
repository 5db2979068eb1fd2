"""Run and sweep directories as release 0.1.0 writes them: this version
resumes them.

tests/fixtures/release_0_1/ holds a real run of the smoke config to 300
actor steps (config.json, its checkpoints, metrics and summary) and a real
sweep of it over two seeds, interrupted after its first point (sweep.json,
each point's config.json and summary.json), both made with the code of
version 0.1.0 (pyproject.toml) before the decision was split from acting.
"""

import os
import shutil


from tests.conftest import REPO_ROOT, read_json, run_launcher


FIXTURES = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'release_0_1')


def _copy(name, tmp_path):
  copy = str(tmp_path / name)
  shutil.copytree(os.path.join(FIXTURES, name), copy)
  return copy


def test_a_release_run_directory_resumes_to_a_raised_budget(tmp_path):
  run_dir = _copy('run', tmp_path)
  saved = read_json(os.path.join(run_dir, 'summary.json'))['actor_steps']
  result = run_launcher(f'--resume={run_dir}', '--config.max_actor_steps=600')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'resuming from' in result.stdout
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['restored_actor_steps'] >= saved >= 300
  assert summary['actor_steps'] >= 600
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert config['config']['max_actor_steps'] == 600
  assert config['config_name'] == 'smoke'


def test_a_release_sweep_directory_is_read_by_a_dry_run_resume(tmp_path):
  sweep_dir = _copy('sweep', tmp_path)
  with open(os.path.join(sweep_dir, 'sweep.json')) as f:
    before = f.read()
  result = run_launcher(f'--resume={sweep_dir}', '--dry_run')
  assert result.returncode == 0, result.stderr
  assert 'sweep of 2 points of smoke: 1 to run' in result.stdout
  assert 'seed=2' in result.stdout
  assert 'nothing was started' in result.stdout
  with open(os.path.join(sweep_dir, 'sweep.json')) as f:
    assert f.read() == before
