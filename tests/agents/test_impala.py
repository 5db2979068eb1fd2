"""IMPALA's adapter in process: the queue Acme's builder makes, the actor
the builder makes stepping a real MinAtar game with the adapter's network,
and the learner's unroll over a sequence from the stored state."""

import re

import jax
import numpy as np
import pytest

from acme_launch import compat  # JAX aliases; before acme
from acme_launch import agents
from acme_launch import envs as environments
from acme_launch import errors
from acme_launch.config import registry
from acme import core
from acme import specs


def _tiny():
  config = registry.load('impala_minatar')
  config.impala.sequence_length, config.impala.batch_size = 5, 2
  config.impala.max_queue_size = 8
  config.network.conv_channels, config.network.lstm_size = (4,), 8
  return config


class _Params(core.VariableSource):
  """A learner's get_variables: the same params under every name."""

  def __init__(self, params):
    self.params, self.names = params, []

  def get_variables(self, names):
    self.names.append(list(names))
    return [self.params for _ in names]


def test_actor_steps_a_game_and_the_queue_holds_its_sequences():
  config = _tiny()
  adapter = agents.load('impala')
  assert adapter.recurrent and adapter.actor_variables == 'network'
  environment = environments.make_environment(config.env_name, seed=0)
  spec = specs.make_environment_spec(environment)
  builder = adapter.make_builder(config, learner_logger_fn=lambda: None,
                                 environment_spec=spec)
  (queue,) = builder.make_replay_tables(spec)
  assert queue.info.max_size == config.impala.max_queue_size
  assert queue.info.max_times_sampled == 1  # Each sequence sampled once.
  signature = queue.info.signature
  assert tuple(signature.extras['logits'].shape) == (
      config.impala.sequence_length, spec.actions.num_values)
  assert tuple(signature.extras['core_state'].hidden.shape) == (
      config.impala.sequence_length, config.network.lstm_size)
  assert tuple(signature.observation.shape) == (
      config.impala.sequence_length,) + spec.observations.shape

  networks = adapter.make_networks(config, spec)
  state = networks.initial_state_fn(
      networks.initial_state_init_fn(jax.random.PRNGKey(0)))
  params = networks.unroll_init_fn(jax.random.PRNGKey(1), state)
  source = _Params(params)
  # The evaluator's policy is the actors': IMPALA evaluates by sampling.
  assert (adapter.make_policy(config, networks, spec, True).forward_fn is
          adapter.make_policy(config, networks, spec, False).forward_fn)
  policy = adapter.make_policy(config, networks, spec, evaluation=False)
  actor = builder.make_actor(jax.random.PRNGKey(2), policy,
                             variable_source=source)
  timestep = environment.reset()
  actor.observe_first(timestep)
  for _ in range(5):
    action = actor.select_action(timestep.observation)
    assert isinstance(action, np.ndarray) and action.dtype == np.int32
    assert 0 <= int(action) < spec.actions.num_values
    timestep = environment.step(action)
    actor.observe(action, timestep)
    if timestep.last():
      break
  assert source.names[0] == ['network']

  # The learner's view: one 5-step sequence unrolled from the stored state.
  observations = np.stack([environment.reset().observation] * 5)
  (logits, values), _ = networks.unroll_fn(params, observations, state)
  assert logits.shape == (5, spec.actions.num_values)
  assert values.shape == (5,)


@pytest.mark.parametrize('field, value, expected', [
    ('sequence_period', 5, 'sequence_period (5) must be less than '
     'sequence_length (5)'),
    ('sequence_length', 1, 'sequence_length must be >= 2'),
    ('entropy_cost', -1.0, 'entropy_cost must be >= 0'),
    ('max_queue_size', 3, 'max_queue_size (3) must be more than '
     'batch_size + 1 (3)'),
    ('samples_per_insert', 0.0, 'samples_per_insert must be in (0, 1]'),
])
def test_bad_settings_raise_one_line_before_launch(field, value, expected):
  config = _tiny()
  config.impala[field] = value
  spec = specs.make_environment_spec(
      environments.make_environment(config.env_name, seed=0))
  with pytest.raises(errors.LaunchError, match=re.escape(expected)):
    agents.load('impala').make_builder(config, lambda: None, spec)


def test_unknown_torso_is_refused():
  config = _tiny()
  config.network.torso = 'transformer'
  spec = specs.make_environment_spec(
      environments.make_environment(config.env_name, seed=0))
  with pytest.raises(errors.LaunchError, match='config.network.torso'):
    agents.load('impala').make_builder(config, lambda: None, spec)


def test_fields_a_config_leaves_out_take_acmes_defaults():
  config = _tiny()
  for name in ('max_queue_size', 'sequence_period', 'variable_update_period',
               'max_gradient_norm'):
    del config.impala[name]
  spec = specs.make_environment_spec(
      environments.make_environment(config.env_name, seed=0))
  adapter = agents.load('impala')
  builder = adapter.make_builder(config, lambda: None, spec)
  (queue,) = builder.make_replay_tables(spec)
  (layout,) = adapter.replay_tables(config, spec)
  # IMPALAConfig's queue of ten batches; a sequence every length - 1 steps.
  assert queue.info.max_size == layout.max_size == 10 * config.impala.batch_size
  assert layout.new_steps_per_item == config.impala.sequence_length - 1
