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
