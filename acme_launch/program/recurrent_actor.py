"""The batched actor for recurrent agents: one policy state per environment.

Acme's own actor for a recurrent agent (dm-acme 0.4.0's `GenericActor` over
the agent's `ActorCore`, e.g. R2D2's in acme/agents/jax/r2d2/actor.py) keeps
one state for its one environment:

* `observe_first`: its key splits in two, and `core.init(key)` makes a
  fresh state (R2D2: a new key for the policy, an epsilon drawn from the
  Ape-X set `0.4 ** logspace(1, 8, num_epsilons)`, the initial LSTM state);
* `select_action`: `core.select_action(params, observation, state)` gives
  the action and the next state;
* `observe`: the adder gets `core.get_extras(state)` of the state
  `select_action` left, so R2D2's `core_state` extra of a step is the LSTM
  state after the network has seen the step's observation (dm-acme 0.4.0's
  learner unrolls from it). IMPALA's core (agents/impala) keeps the state
  before the step and the step's logits in its state for its extras, as
  Acme's IMPALAActor stores them; the loop passes any extras through.

`RecurrentBatchedEnvironmentLoop` keeps the N environments' states stacked
along axis 0 (and each environment's own key chain), and does all of that
in ONE jitted call a step: rows whose timestep is FIRST (a reset, EnvPool's
auto-reset or the gym backend's `reset_some`) get a fresh state from their
environment's key, then the core's `select_action` runs vmapped over the
rows, and the rows' extras come back with the actions for the per-environment
adders. Each environment's trajectory, extras and epsilons included, is what
a separate Acme actor over the same core would write
(tests/program/test_recurrent_actor.py compares every item).
"""

from typing import Any

from acme_launch import compat  # JAX aliases; before acme
from acme.agents.jax import actor_core as actor_core_lib
from acme.jax import variable_utils
from acme.utils import counting
from acme.utils import loggers
import jax
import jax.numpy as jnp

from acme_launch import envs
from acme_launch.program import batched_actor


def _rows_where(mask, new, old):
  """Row i of `new` where mask[i], else of `old` (pytrees, leading axis)."""
  def pick(a, b):
    return jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)
  return jax.tree_util.tree_map(pick, new, old)


def make_step(core: actor_core_lib.ActorCore):
  """(params, keys, states, observations, env_ids, first) -> (keys, states,
  actions, extras): one step of the environments `env_ids`, batched."""
  init = jax.vmap(core.init)
  select_action = jax.vmap(core.select_action, in_axes=(None, 0, 0))
  get_extras = jax.vmap(core.get_extras)

  def step(params, keys, states, observations, env_ids, first):
    take = lambda x: x[env_ids]
    row_keys = take(keys)
    row_states = jax.tree_util.tree_map(take, states)
    # observe_first, on the rows that start an episode.
    split = jax.vmap(jax.random.split)(row_keys)
    row_keys = jnp.where(first[:, None], split[:, 0], row_keys)
    row_states = _rows_where(first, init(split[:, 1]), row_states)
    actions, row_states = select_action(params, observations, row_states)
    extras = get_extras(row_states)
    keys = keys.at[env_ids].set(row_keys)
    states = jax.tree_util.tree_map(lambda s, r: s.at[env_ids].set(r),
                                    states, row_states)
    return keys, states, actions, extras

  return step


class RecurrentBatchedEnvironmentLoop(batched_actor.BatchedEnvironmentLoop):
  """`BatchedEnvironmentLoop` with an Acme `ActorCore`'s state per
  environment.

  `random_keys` is [num_envs, 2]: environment i's key, as a separate
  actor's `GenericActor` would hold it. The adder is per environment
  (`batched_adders.PerEnvAdders` of the builder's own adders).
  """

  def __init__(self, environments, actor_core: actor_core_lib.ActorCore,
               variable_client: variable_utils.VariableClient,
               adder: batched_actor.BatchedAdder, random_keys: Any,
               counter: counting.Counter, logger: loggers.Logger,
               max_actor_steps: int = 0):
    super().__init__(environments, None, variable_client, adder, None,
                     counter, logger, max_actor_steps=max_actor_steps,
                     policy_returns_extras=True)
    keys = jnp.asarray(random_keys)
    if keys.shape[0] != environments.num_envs:
      raise ValueError(f'{keys.shape[0]} keys for {environments.num_envs} '
                       'environments')
    self._keys = keys
    # Placeholders of the right shapes: every environment's first step
    # makes its state anew (its key is not used here).
    self._states = jax.vmap(actor_core.init)(keys)
    self._step = jax.jit(make_step(actor_core), backend='cpu')

  def _select_actions(self, timesteps: envs.TimeSteps):
    self._keys, self._states, actions, extras = self._step(
        self._variable_client.params, self._keys, self._states,
        timesteps.observation, timesteps.env_id, timesteps.first())
    return batched_actor.actions_and_extras((actions, extras), True)

