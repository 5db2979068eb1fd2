"""Config files written against the old module name still load."""

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
