"""The config schema: old module name, shipped configs, field checks."""

import pytest

from acme_launch import errors
from acme_launch import experiment_config
from acme_launch.config import registry
from acme_launch.config import schema


def test_old_module_name_is_the_schema():
  assert experiment_config.base_config is schema.base_config
  assert experiment_config.validate is schema.validate


def test_shipped_configs_are_found_inside_the_package():
  configs = registry.available()
  assert {'smoke', 'ppo_mujoco'} <= set(configs)
  assert all('/acme_launch/configs/' in path for path in configs.values())


@pytest.mark.parametrize('backend, envs, async_envs, refused', [
    ('envpool', 16, 32, False),   # ppo_mujoco's default.
    ('envpool', 16, 0, False),    # Sync.
    ('envpool', 64, 32, True),    # Fewer than a step takes.
    ('envpool', 16, 16, True),
    ('envpool', 16, -1, True),
    ('gym', 64, 32, False),       # Ignored by the gym backend.
])
def test_envpool_async_envs_must_exceed_envs_per_actor(backend, envs,
                                                       async_envs, refused):
  config = registry.load('ppo_mujoco')
  config.env_backend = backend
  config.envs_per_actor, config.envpool_async_envs = envs, async_envs
  if not refused:
    schema.validate(config)
    return
  with pytest.raises(errors.LaunchError, match='envpool_async_envs') as e:
    schema.validate(config)
  assert '\n' not in str(e.value)


def test_a_config_file_on_the_old_name_loads_with_a_warning_naming_the_new_import(
    monkeypatch):
  import os
  import sys
  import acme_launch
  from tests.conftest import REPO_ROOT
  # As in a fresh launcher: the old module not imported yet.
  monkeypatch.delitem(sys.modules, 'acme_launch.experiment_config')
  monkeypatch.delattr(acme_launch, 'experiment_config')
  path = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'old_name_config.py')
  with pytest.warns(errors.DeprecatedName) as warned:
    config = registry.load(path)
  message = str(warned[0].message)
  assert 'acme_launch.experiment_config is deprecated' in message
  assert '`from acme_launch.config import schema`' in message
  assert config.max_actor_steps == 300
  schema.validate(config)


@pytest.mark.parametrize('field, value', [
    ('eval_video_every', -1), ('eval_video_size', 8),
    ('eval_video_size', 10_000)])
def test_training_videos_out_of_range_are_one_line(field, value):
  config = registry.load('smoke')
  config[field] = value
  with pytest.raises(errors.LaunchError, match=f'config.{field} must be') as e:
    schema.validate(config)
  assert '\n' not in str(e.value)
