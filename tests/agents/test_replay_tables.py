"""Every shipped agent declares its replay tables, sized by real fields of
its shipped config."""

import pytest

from acme_launch import compat  # JAX aliases; before acme
from acme_launch import agents
from acme_launch import envs as environments
from acme_launch.config import registry
from acme_launch.plan import replay_memory
from acme import specs

CONFIGS = {'ppo': 'ppo_mujoco', 'sac': 'sac_mujoco', 'td3': 'td3_mujoco',
           'd4pg': 'd4pg_mujoco', 'dqn': 'dqn_cartpole', 'r2d2': 'r2d2_atari',
           'impala': 'impala_minatar'}


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
  assert layout.fields and all(f.startswith('config.') for f in layout.fields)
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
  elif agent == 'impala':  # A queue of sequences sharing one step.
    assert layout.max_size == size_field == config.impala.max_queue_size
    assert layout.steps_per_item == config.impala.sequence_length
    assert layout.new_steps_per_item == config.impala.sequence_length - 1
    (logits,) = [c for c in layout.columns if c.path == 'extras.logits']
    assert logits.shape == (spec.actions.num_values,)
  elif agent == 'ppo':
    assert layout.max_size == (config.ppo.max_queue_batches *
                               config.ppo.batch_size + 2)
  else:
    assert layout.max_size == size_field
    assert layout.new_steps_per_item == 1


def test_under_ray_the_replay_nodes_reservation_is_its_limit():
  """The launcher's check: this host's memory under local launch types,
  the replay node's ray_memory_mb under --launch_type=ray."""
  from acme_launch import errors
  from acme_launch import prepare
  from acme_launch.plan import resources
  from acme_launch.program import build
  config = registry.load('r2d2_atari')
  config.r2d2.min_replay_size, config.r2d2.max_replay_size = 1000, 2000
  config.resources.replay.ray_memory_mb = 500  # Less than the process.
  spec = specs.make_environment_spec(environments.make_environment(
      config.env_name, seed=0, backend='envpool'))
  plan = resources.plan_resources(build.node_list(config), config.resources)
  adapter = agents.load('r2d2')
  local = prepare._plan_replay(adapter, config, spec, plan, 'local_mp')
  assert local.limit_mb == 0 and local.host_bytes > local.estimate.bytes
  with pytest.raises(errors.LaunchError) as raised:
    prepare._plan_replay(adapter, config, spec, plan, 'ray')
  message = str(raised.value)
  assert '--config.resources.replay.ray_memory_mb=500' in message
  assert message.endswith('or raise --config.resources.replay.ray_memory_mb')
  config.resources.replay.ray_memory_mb = 20_000
  plan = resources.plan_resources(build.node_list(config), config.resources)
  assert prepare._plan_replay(adapter, config, spec, plan, 'ray').host_bytes is None
