"""Every shipped agent declares its replay tables, sized by real fields of
its shipped config."""

import pytest

from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
from acme_launch import agents
from acme_launch import envs as environments
from acme_launch.config import registry
from acme_launch.plan import replay_memory
from acme import specs  # pylint: disable=g-bad-import-order

CONFIGS = {'ppo': 'ppo_mujoco', 'sac': 'sac_mujoco', 'td3': 'td3_mujoco',
           'd4pg': 'd4pg_mujoco', 'dqn': 'dqn_cartpole', 'r2d2': 'r2d2_atari'}


def _resolve(config, field: str):
  """'config.r2d2.max_replay_size' -> its value in config."""
  value = config
  for part in field.split('.')[1:]:
    value = value[part]
  return value


@pytest.mark.parametrize('agent', agents.SHIPPED)
def test_shipped_agents_declare_their_replay_tables(agent):
  config = registry.load(CONFIGS[agent])
  environment = environments.make_environment(
      config.env_name, seed=0, backend=config.get('env_backend', 'gym'))
  spec = specs.make_environment_spec(environment)
  (layout,) = agents.load(agent).replay_tables(config, spec)
  assert layout.max_size > 0
  assert layout.fields and all(f.startswith(f'config.') for f in layout.fields)
  for field in layout.fields:
    _resolve(config, field)  # A KeyError names a field that does not exist.
  size_field = _resolve(config, layout.fields[0])
  observation = [c for c in layout.columns if c.path == 'observation']
  assert observation[0].shape == tuple(spec.observations.shape)
  assert replay_memory.estimate([layout]).bytes > 0
  if agent == 'r2d2':
    assert layout.max_size == size_field == 50_000
    assert observation[0].pixel
    assert layout.new_steps_per_item == config.r2d2.sequence_period
    assert layout.steps_per_item == (config.r2d2.burn_in_length +
                                     config.r2d2.trace_length + 1)
  elif agent == 'ppo':
    assert layout.max_size == (config.ppo.max_queue_batches *
                               config.ppo.batch_size + 2)
  else:
    assert layout.max_size == size_field
    assert layout.new_steps_per_item == 1
