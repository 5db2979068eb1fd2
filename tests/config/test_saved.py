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


@pytest.mark.parametrize('content', [
    '[1, 2]', '"text"', '7', 'null', '{}', '{"config": [1]}',
    '{"config": {}, "python_path": "/x"}', '{"config": {}, "config_name": 1}',
    'not json', '\xff'])
def test_a_config_json_that_is_no_saved_config_is_one_line(run_dir, content):
  with open(os.path.join(run_dir, 'config.json'), 'w',
            encoding='latin-1') as f:
    f.write(content)
  with pytest.raises(errors.LaunchError) as raised:
    options_lib.parse_again(['launch.py', f'--resume={run_dir}'])
  assert str(raised.value) == (
      f'{run_dir}/config.json is not a saved run config (a JSON object with '
      'a "config" object); pass --config to resume with a config of yours')


def test_a_run_directory_others_can_write_to_is_never_read(run_dir):
  """Its saved python_path and agent module would run in every node."""
  path = os.path.join(run_dir, 'config.json')
  with open(path) as f:
    record = json.load(f)
  record['python_path'] = ['/tmp/planted']
  with open(path, 'w') as f:
    json.dump(record, f)
  os.chmod(run_dir, 0o777)
  with pytest.raises(errors.LaunchError) as raised:
    options_lib.parse_again(['launch.py', f'--resume={run_dir}'])
  assert str(raised.value) == (
      f'--resume={run_dir}: run directory {run_dir} is writable by others '
      '(mode 0777): refused, they could change what a run reads there')


def test_a_saved_config_that_is_a_link_is_refused(run_dir, tmp_path):
  os.rename(os.path.join(run_dir, 'config.json'), tmp_path / 'elsewhere.json')
  os.symlink(tmp_path / 'elsewhere.json', os.path.join(run_dir, 'config.json'))
  with pytest.raises(errors.LaunchError,
                     match='config.json is a symbolic link'):
    options_lib.parse_again(['launch.py', f'--resume={run_dir}'])


def test_resume_of_a_file_is_one_line(tmp_path):
  (tmp_path / 'file').write_text('x')
  with pytest.raises(errors.LaunchError) as raised:
    options_lib.parse_again(['launch.py', f'--resume={tmp_path}/file'])
  assert str(raised.value) == (f'--resume={tmp_path}/file: run directory '
                               f'{tmp_path}/file is not a directory')


def test_a_saved_tuple_field_is_a_tuple_again_and_takes_an_override(run_dir):
  # config.json keeps the network's layer tuples as JSON lists.
  assert saved.get_config(run_dir).network.policy_layers == (16, 16)
  options = options_lib.parse_again([
      'launch.py', f'--resume={run_dir}',
      '--config.network.policy_layers=(8,)'])
  assert options.config.network.policy_layers == (8,)
  assert options.config.network.value_layers == (16, 16)
