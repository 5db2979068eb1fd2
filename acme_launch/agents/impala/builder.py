"""IMPALA's builder: Acme's IMPALABuilder (dm-acme 0.4.0) from
`config.impala`, its actors fetching parameters every
`impala.variable_update_period` steps (Acme: every 1,000) and stepping a
jitted policy whose action is a numpy value for the environment, its
learner's dataset batched per device; and what its queue holds."""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import impala
from acme.agents.jax.impala import acting
from acme.agents.jax.impala import builder as impala_builder
from acme.jax import variable_utils
from acme.utils import loggers
import haiku as hk
import jax
import ml_collections
import numpy as np

from acme_launch.agents import devices
from acme_launch.agents.impala import config as impala_config
from acme_launch.agents.impala import networks as impala_networks

# The learner's get_variables ignores the name; Acme's IMPALA actor asks for
# 'network'.
ACTOR_VARIABLES = 'network'


class Actor(acting.IMPALAActor):
  """Acme's IMPALA actor, its action handed to the environment as numpy."""

  def select_action(self, observation):
    return np.asarray(super().select_action(observation))


class Builder(impala_builder.IMPALABuilder):
  """Acme's IMPALA builder; its actors fetch parameters every
  `variable_update_period` steps and step a jitted policy.

  Acme's learner pmaps over every device its process has and takes one
  dataset batch per device: the dataset's batch is `device_batch_size`,
  the config's `batch_size` over the learner's devices (agents/devices.py).
  The queue's rate limiter keeps the whole `batch_size`.
  """

  def __init__(self, config: impala.IMPALAConfig, core_state_spec,
               logger_fn: Callable[[], loggers.Logger],
               variable_update_period: int, device_batch_size: int):
    super().__init__(config, core_state_spec, logger_fn=logger_fn)
    self._variable_update_period = variable_update_period
    # What Acme's make_dataset_iterator batches by.
    self._num_sequences_per_batch = device_batch_size

  def make_actor(self, random_key, policy_network, adder=None,
                 variable_source=None):
    variable_client = variable_utils.VariableClient(
        client=variable_source, key=ACTOR_VARIABLES,
        update_period=self._variable_update_period, device='cpu')
    return Actor(
        forward_fn=jax.jit(policy_network.forward_fn),
        initial_state_init_fn=policy_network.initial_state_init_fn,
        initial_state_fn=policy_network.initial_state_fn,
        variable_client=variable_client, adder=adder,
        rng=hk.PRNGSequence(random_key))


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> Builder:
  impala_config.check(config, environment_spec)
  networks = impala_networks.make_networks(config, environment_spec)
  # The LSTM state the actors store with each step: its shapes for the
  # queue's signature.
  core_state = networks.initial_state_fn(
      networks.initial_state_init_fn(jax.random.PRNGKey(0)))
  return Builder(impala_config.impala_config(config), core_state,
                 logger_fn=learner_logger_fn,
                 variable_update_period=variable_update_period(config),
                 device_batch_size=devices.per_device_batch(
                     config, 'impala', impala_config.field(config,
                                                           'batch_size')))


def variable_update_period(config: ml_collections.ConfigDict) -> int:
  """Every how many updates its actors fetch the learner's variables:
  `impala.variable_update_period`, else 1,000 as Acme's actor does."""
  return impala_config.field(config, 'variable_update_period')


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its queue (plan/replay_memory.py): at most `max_queue_size` sequences
  of `sequence_length` steps, a new one every `sequence_period` steps
  (`sequence_length - 1` when 0), each step with the LSTM state (hidden and
  cell, `network.lstm_size` float32 each) its actor had before it and the
  policy's logits (float32, one per action)."""
  from acme_launch.plan import replay_memory
  lstm = (int(config.network.lstm_size),)
  extras = {
      'core_state': {'hidden': replay_memory.Column('', lstm, 'float32'),
                     'cell': replay_memory.Column('', lstm, 'float32')},
      'logits': replay_memory.Column(
          '', (int(environment_spec.actions.num_values),), 'float32')}
  get = lambda name: impala_config.field(config, name)
  length = int(get('sequence_length'))
  return (replay_memory.sequence_layout(
      get('replay_table_name'), get('max_queue_size'),
      environment_spec, length, get('sequence_period') or length - 1,
      fields=('config.impala.max_queue_size',
              'config.impala.sequence_length', 'config.network.lstm_size'),
      extras=extras),)
