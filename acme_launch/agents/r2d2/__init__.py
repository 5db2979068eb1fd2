"""Acme's JAX R2D2 (dm-acme 0.4.0) from a `config.r2d2` section.

Recurrent replay distributed DQN (Kapturowski et al., 2019): actors write
overlapping sequences (`burn_in_length + trace_length + 1` steps, a new one
every `sequence_period` steps) with the LSTM state at their start into a
prioritized Reverb table; the learner burns in the state on the first
`burn_in_length` steps and trains on n-step double-Q targets with the
signed-hyperbolic value transform. The network is ours (networks.py), sized
by `config.network`, on the environment's observations as they are.

Exploration is Acme's: each actor draws its epsilon for each episode from
the Ape-X set `0.4 ** logspace(1, 8, num_epsilons)`, so the actors of a
program cover that range; the evaluator uses `evaluation_epsilon`.

Actors are Acme's own recurrent actor and adder with one environment each;
with `config.envs_per_actor` > 1, the batched recurrent actor
(program/recurrent_actor.py) steps Acme's R2D2 actor core (`make_actor_core`
below) for all of them at once, one LSTM state and one epsilon per
environment, into Acme's SequenceAdder per environment.
"""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import actor_core as actor_core_lib
from acme.agents.jax import r2d2
from acme.agents.jax.r2d2 import actor as r2d2_actor
from acme.utils import loggers
import jax
import ml_collections

from acme_launch import errors
from acme_launch.agents import images
from acme_launch.agents import replay_fields
from acme_launch.agents.r2d2 import networks as r2d2_networks

# The learner's get_variables ignores the name; Acme's R2D2 actor asks for
# 'actor_variables', and so do the loops that step the policy themselves.
ACTOR_VARIABLES = 'actor_variables'
# The policy keeps an LSTM state per environment: the final evaluation plays
# its episodes with the builder's own actor; batched actors step
# make_actor_core's core.
RECURRENT = True


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
  return r2d2.R2D2Builder(make_networks(config, environment_spec),
                          r2d2_config(config), logger_fn=learner_logger_fn)


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec
                  ) -> r2d2.R2D2Networks:
  return r2d2_networks.make_networks(config, environment_spec)


def make_policy(config: ml_collections.ConfigDict,
                networks: r2d2.R2D2Networks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  """Acme's epsilon-greedy recurrent policy, (params, key, observation,
  core_state, epsilon) -> (action, core_state); the evaluator's ignores the
  actor's epsilon and uses `config.r2d2.evaluation_epsilon`."""
  del environment_spec  # The networks carry what the policy needs.
  return r2d2.make_behavior_policy(networks, r2d2_config(config), evaluation)


def make_actor_core(config: ml_collections.ConfigDict,
                    networks: r2d2.R2D2Networks, policy
                    ) -> actor_core_lib.ActorCore:
  """The ActorCore `R2D2Builder.make_actor` wraps in its actor: `policy`
  (make_policy's), the network's initial LSTM state, and an epsilon drawn
  per episode from `num_epsilons` Ape-X values. For actors stepping several
  environments (program/recurrent_actor.py)."""
  key = jax.random.PRNGKey(0)  # An LSTM's initial state: zeros, any key.
  initial_state = networks.initial_state.apply(
      networks.initial_state.init(key, 1), key, 1)
  return r2d2_actor.get_actor_core(policy, initial_state,
                                   config.r2d2.num_epsilons)


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
