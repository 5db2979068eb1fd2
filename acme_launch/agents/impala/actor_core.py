"""IMPALA's policy and actor core: what Acme's IMPALA actor steps, and
Acme's IMPALAActor as an ActorCore for actors stepping several environments
(program/recurrent_actor.py)."""

from typing import NamedTuple

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import actor_core as actor_core_lib
from acme.agents.jax import impala
import haiku as hk
import jax
import jax.numpy as jnp
import ml_collections

from acme_launch.agents.impala import networks as impala_networks


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
