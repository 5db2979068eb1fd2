"""Acme's JAX IMPALA (dm-acme 0.4.0) from a `config.impala` section.

Importance-weighted actor-learner (Espeholt et al., 2018): actors play
their current policy and write sequences of `sequence_length` steps, with
the LSTM state at each step and the policy's logits (the behaviour policy),
into a Reverb queue; each sequence is sampled once (FIFO). The learner
unrolls its own policy over each sequence from the stored initial state and
corrects for the lag between the actors' policy and its own with V-trace;
its loss is the policy gradient plus `baseline_cost` x the value loss minus
`entropy_cost` x the entropy. The network is ours (networks.py), sized by
`config.network`, on the environment's observations as they are.

With `config.envs_per_actor` 1, actors are Acme's own recurrent actor (it
samples an action from the logits) and `SequenceAdder`, one environment
each. Two changes to Acme's actor, in `Builder.make_actor`: the policy step
is jitted (Acme's applies the haiku network op by op) and its action is a
numpy value for the environment; and the actors fetch parameters every
`impala.variable_update_period` steps (Acme: every 1,000). With
`config.envs_per_actor` > 1, the batched recurrent actor
(program/recurrent_actor.py) steps `make_actor_core` below for all of them
at once, one LSTM state per environment, into Acme's SequenceAdder per
environment: the same steps and extras as Acme's IMPALAActor, with its key
drawn per episode as Acme's GenericActor draws it. The evaluator samples
from the policy too, as the IMPALA paper evaluates.
"""

import math
from typing import Callable, NamedTuple

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import actor_core as actor_core_lib
from acme.agents.jax import impala
from acme.agents.jax.impala import acting
from acme.agents.jax.impala import builder as impala_builder
from acme.jax import variable_utils
from acme.utils import loggers
import haiku as hk
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from acme_launch import errors
from acme_launch.agents import images
from acme_launch.agents import replay_fields
from acme_launch.agents.impala import networks as impala_networks

# The learner's get_variables ignores the name; Acme's IMPALA actor asks for
# 'network'.
ACTOR_VARIABLES = 'network'
# The policy keeps an LSTM state per environment: the final evaluation plays
# its episodes with the builder's own actor; batched actors step
# make_actor_core's core.
RECURRENT = True

# Fields of `config.impala` that are ours, not IMPALAConfig's, and their
# defaults (Acme's actor fetches parameters every 1,000 steps).
_OWN_FIELDS = {'variable_update_period': 1000}


def impala_config(config: ml_collections.ConfigDict) -> impala.IMPALAConfig:
  """Acme's IMPALAConfig from `config.impala` (`sequence_period` 0 is
  Acme's default: `sequence_length - 1`, sequences sharing one step)."""
  fields = {k: v for k, v in config.impala.to_dict().items()
            if k not in _OWN_FIELDS}
  if not fields.get('sequence_period'):
    fields['sequence_period'] = None
  return impala.IMPALAConfig(**fields)


class Actor(acting.IMPALAActor):
  """Acme's IMPALA actor, its action handed to the environment as numpy."""

  def select_action(self, observation):
    return np.asarray(super().select_action(observation))


class Builder(impala_builder.IMPALABuilder):
  """Acme's IMPALA builder; its actors fetch parameters every
  `variable_update_period` steps and step a jitted policy."""

  def __init__(self, config: impala.IMPALAConfig, core_state_spec,
               logger_fn: Callable[[], loggers.Logger],
               variable_update_period: int):
    super().__init__(config, core_state_spec, logger_fn=logger_fn)
    self._variable_update_period = variable_update_period

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


def check(config: ml_collections.ConfigDict, environment_spec) -> None:
  """LaunchError (one line) for the first bad `config.impala` or
  `config.network` field; Acme would fail on them after launch."""
  replay_fields.check_discrete_actions('impala', config, environment_spec)
  get = lambda name: _field(config, name)

  def fail(message: str):
    raise errors.LaunchError(f'config.impala.{message}')

  batch, length = get('batch_size'), get('sequence_length')
  period = get('sequence_period') or 0
  for name, value, least in (
      ('batch_size', batch, 1), ('sequence_length', length, 2),
      ('sequence_period', period, 0),
      ('variable_update_period', get('variable_update_period'), 1)):
    if value < least:
      fail(f'{name} must be >= {least}, got {value}')
  if period >= length:
    fail(f'sequence_period ({period}) must be less than sequence_length '
         f'({length}), or 0 for sequence_length - 1: sequences share their '
         'last step, which the learner uses only to bootstrap')
  if not 0 < get('samples_per_insert') <= 1:
    fail('samples_per_insert must be in (0, 1] (a queue samples each '
         f'sequence at most once), got {get("samples_per_insert")}')
  if get('max_queue_size') <= batch + 1:
    fail(f'max_queue_size ({get("max_queue_size")}) must be more than '
         f'batch_size + 1 ({batch + 1}): an episode\'s last step can write '
         'two sequences at once')
  for name in ('learning_rate', 'max_abs_reward', 'max_gradient_norm'):
    if not get(name) > 0:
      fail(f'{name} must be > 0, got {get(name)}')
  for name in ('entropy_cost', 'baseline_cost'):
    if get(name) < 0 or not math.isfinite(get(name)):
      fail(f'{name} must be >= 0, got {get(name)}')
  torso = config.network.get('torso', 'conv')
  if torso not in impala_networks.TORSOS:
    raise errors.LaunchError(
        f'config.network.torso must be one of '
        f'{", ".join(impala_networks.TORSOS)}, got {torso!r}')
  if torso == 'conv':
    images.check('impala', config.network, environment_spec.observations)
  if config.network.lstm_size < 1:
    raise errors.LaunchError(
        f'config.network.lstm_size must be >= 1, got '
        f'{config.network.lstm_size}')


def _field(config: ml_collections.ConfigDict, name: str):
  """`config.impala.<name>`, else its default: ours, or IMPALAConfig's
  (its queue of ten batches counted in sequences)."""
  section = config.impala
  if name in section:
    return section[name]
  if name in _OWN_FIELDS:
    return _OWN_FIELDS[name]
  if name == 'max_queue_size':
    return 10 * _field(config, 'batch_size')
  return replay_fields.acme_field(section, impala.IMPALAConfig, name)


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> Builder:
  check(config, environment_spec)
  networks = make_networks(config, environment_spec)
  # The LSTM state the actors store with each step: its shapes for the
  # queue's signature.
  core_state = networks.initial_state_fn(
      networks.initial_state_init_fn(jax.random.PRNGKey(0)))
  return Builder(impala_config(config), core_state,
                 logger_fn=learner_logger_fn,
                 variable_update_period=_field(config, 'variable_update_period'))


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec
                  ) -> impala_networks.Networks:
  return impala_networks.make_networks(config, environment_spec)


def make_policy(config: ml_collections.ConfigDict,
                networks: impala.IMPALANetworks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  """What Acme's IMPALA actor steps: the networks' forward_fn, (params,
  observation, core_state) -> ((logits, value), core_state), and the
  initial state. The evaluator's is the same: it samples from the policy."""
  del config, environment_spec, evaluation
  return networks


class ActorState(NamedTuple):
  """An IMPALA actor core's state between steps: what Acme's IMPALAActor
  keeps (its LSTM state, the one before the last step and the last step's
  logits), and its key."""
  rng: jax.Array
  lstm: hk.LSTMState
  prev_lstm: hk.LSTMState
  logits: jax.Array


def make_actor_core(config: ml_collections.ConfigDict,
                    networks: impala_networks.Networks, policy
                    ) -> actor_core_lib.ActorCore:
  """Acme's IMPALAActor as an ActorCore, for actors stepping several
  environments (program/recurrent_actor.py): `policy` (make_policy's, the
  networks) steps the LSTM from its initial state at an episode's start,
  the action is sampled from the logits, and the extras are those
  IMPALAActor.observe writes: the step's `logits` and the `core_state`
  before it (the learner unrolls from it)."""
  del config
  key = jax.random.PRNGKey(0)  # An LSTM's initial state: zeros, any key.
  initial = policy.initial_state_fn(policy.initial_state_init_fn(key))
  no_logits = jnp.zeros((networks.num_actions,), jnp.float32)

  def init(rng):
    return ActorState(rng, initial, initial, no_logits)

  def select_action(params, observation, state):
    rng, key = jax.random.split(state.rng)
    (logits, _), lstm = policy.forward_fn(params, observation, state.lstm)
    action = jax.random.categorical(key, logits)
    return action, ActorState(rng, lstm, state.lstm, logits)

  def get_extras(state):
    return {'logits': state.logits, 'core_state': state.prev_lstm}

  return actor_core_lib.ActorCore(init=init, select_action=select_action,
                                  get_extras=get_extras)


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
  length = int(_field(config, 'sequence_length'))
  return (replay_memory.sequence_layout(
      _field(config, 'replay_table_name'), _field(config, 'max_queue_size'),
      environment_spec, length, _field(config, 'sequence_period') or length - 1,
      fields=('config.impala.max_queue_size',
              'config.impala.sequence_length', 'config.network.lstm_size'),
      extras=extras),)
