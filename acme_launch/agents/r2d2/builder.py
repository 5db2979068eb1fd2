"""R2D2's builder: Acme's JAX R2D2Builder (dm-acme 0.4.0) from `config.r2d2`,
its fields checked before launch, and what its replay holds.

Acme's R2D2 learner pmaps over every device its process has, one dataset
batch per device: the builder's batch is `r2d2.batch_size` over the
learner's devices (agents/devices.py), so a step trains on `batch_size`
sequences on any number of them."""

import dataclasses
from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import r2d2
from acme.utils import loggers
import ml_collections

from acme_launch import errors
from acme_launch.agents import devices
from acme_launch.agents import images
from acme_launch.agents import replay_fields
from acme_launch.agents.r2d2 import networks as r2d2_networks


def r2d2_config(config: ml_collections.ConfigDict) -> r2d2.R2D2Config:
  """Acme's R2D2Config from `config.r2d2` (every field is one of its own)."""
  return r2d2.R2D2Config(**config.r2d2.to_dict())


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> r2d2.R2D2Builder:
  replay_fields.check_discrete_actions('r2d2', config, environment_spec)
  replay_fields.check('r2d2', config.r2d2)
  section = config.r2d2
  for name, least in (('trace_length', 1), ('sequence_period', 1),
                      ('burn_in_length', 0), ('bootstrap_n', 1),
                      ('num_epsilons', 1)):
    if section[name] < least:
      raise errors.LaunchError(
          f'config.r2d2.{name} must be >= {least}, got {section[name]}')
  images.check('r2d2', config.network, environment_spec.observations)
  acme_config = r2d2_config(config)
  # Its dataset and learner batch per device; the replay table does not use
  # the batch size.
  acme_config = dataclasses.replace(
      acme_config, batch_size=devices.per_device_batch(
          config, 'r2d2', acme_config.batch_size))
  return r2d2.R2D2Builder(r2d2_networks.make_networks(config, environment_spec),
                          acme_config, logger_fn=learner_logger_fn)


def variable_update_period(config: ml_collections.ConfigDict) -> int:
  """Every how many updates its actors fetch the learner's variables: the
  R2D2Config's `variable_update_period` (Acme's default 400), as
  `R2D2Builder.make_actor` reads it."""
  return r2d2_config(config).variable_update_period


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay (plan/replay_memory.py): Acme's SequenceAdder writes
  `burn_in_length + trace_length + 1` steps every `sequence_period` steps,
  each step with the LSTM state (hidden and cell, `network.lstm_size`
  float32 each) its actor had before it."""
  from acme_launch.plan import replay_memory
  section = config.r2d2
  lstm = (int(config.network.lstm_size),)
  state = {'core_state': {'hidden': replay_memory.Column('', lstm, 'float32'),
                          'cell': replay_memory.Column('', lstm, 'float32')}}
  return (replay_memory.sequence_layout(
      replay_fields.acme_field(section, r2d2.R2D2Config, 'replay_table_name'),
      section.max_replay_size, environment_spec,
      replay_memory.sequence_steps(section.burn_in_length,
                                   section.trace_length),
      section.sequence_period,
      fields=('config.r2d2.max_replay_size', 'config.r2d2.sequence_period',
              'config.network.lstm_size'),
      extras=state),)
