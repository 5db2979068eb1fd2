"""A run directory's saved config, loaded as a config file: --resume alone
with --config.FIELD overrides (config/saved.py, config/options.py)."""

import json
import os
import shutil

import pytest

from acme_launch import errors
from acme_launch.config import options as options_lib
from acme_launch.config import saved
from tests.conftest import REPO_ROOT

RELEASE_RUN = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'release_0_1', 'run')


@pytest.fixture
def run_dir(tmp_path):
  """A copy of a run directory as release 0.1.0 wrote it (its config.json)."""
  path = str(tmp_path / 'run')
  os.makedirs(path)
  shutil.copy(os.path.join(RELEASE_RUN, 'config.json'), path)
  return path


def test_resume_alone_applies_overrides_to_the_saved_config(run_dir):
  options = options_lib.parse_again([
      'launch.py', f'--resume={run_dir}', '--config.max_actor_steps=900',
      '--config.ppo.learning_rate=0.001'])
  assert options.config.max_actor_steps == 900
  assert options.config.ppo.learning_rate == 0.001
  assert options.config.num_actors == 1           # The rest as saved.
  assert options.config_name == 'smoke'
  assert options.python_path == ()


def test_resume_alone_without_overrides_is_the_saved_config(run_dir):
  options = options_lib.parse_again(['launch.py', f'--resume={run_dir}'])
  assert options.config.to_dict() == saved.get_config(run_dir).to_dict()
  assert options.config.max_actor_steps == 300


def test_the_saved_python_path_goes_with_it(run_dir):
  path = os.path.join(run_dir, 'config.json')
  with open(path) as f:
    record = json.load(f)
  record['python_path'] = ['/home/u/my_agents']
  with open(path, 'w') as f:
    json.dump(record, f)
  options = options_lib.parse_again(['launch.py', f'--resume={run_dir}'])
  assert options.python_path == ('/home/u/my_agents',)


@pytest.mark.parametrize('override, expected', [
    ('--config.max_actor_stepz=9', "unknown config field in override: 'max_actor_stepz'"),
    ('--config.max_actor_steps=many', 'flag --config.max_actor_steps=many:'),
])
def test_a_bad_override_is_one_line(run_dir, override, expected):
  with pytest.raises(errors.LaunchError) as raised:
    options_lib.parse_again(['launch.py', f'--resume={run_dir}', override])
  assert expected in str(raised.value) and '\n' not in str(raised.value)


def test_an_older_config_gets_the_fields_added_since(run_dir):
  path = os.path.join(run_dir, 'config.json')
  with open(path) as f:
    record = json.load(f)
  del record['config']['final_eval_episodes']
  with open(path, 'w') as f:
    json.dump(record, f)
  options = options_lib.parse_again(
      ['launch.py', f'--resume={run_dir}', '--config.final_eval_episodes=3'])
  assert options.config.final_eval_episodes == 3
