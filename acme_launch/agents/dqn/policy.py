"""DQN's epsilon-greedy policy: one `dqn.epsilon` for every actor, or
Ape-X's fixed epsilons, one per environment (`dqn.apex_epsilons`); the
evaluator's `dqn.eval_epsilon` (greedy by default)."""

from typing import Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.jax import networks as networks_lib
from acme.jax import utils
import jax.numpy as jnp
import ml_collections
import numpy as np
import rlax

# Ape-X (Horgan et al., 2018): of N exploring environments, the i-th uses
# epsilon = BASE ** (1 + ALPHA * i / (N - 1)), from 0.4 down to 0.4**8.
APEX_EPSILON_BASE = 0.4
APEX_EPSILON_ALPHA = 7.0


def actor_epsilons(config: ml_collections.ConfigDict,
                   actor_index: Optional[int]) -> Optional[np.ndarray]:
  """Ape-X's epsilons of actor `actor_index`'s environments (one each, of
  num_actors x envs_per_actor in all), or None: `dqn.apex_epsilons` off, or
  not an actor (the evaluator, the launcher's checks)."""
  if not config.dqn.get('apex_epsilons', False) or actor_index is None:
    return None
  per_actor = config.envs_per_actor
  total = config.num_actors * per_actor
  index = actor_index * per_actor + np.arange(per_actor)
  return APEX_EPSILON_BASE ** (
      1 + APEX_EPSILON_ALPHA * index / max(total - 1, 1))


def actor_policy_inputs(config: ml_collections.ConfigDict,
                        actor_index: int) -> Optional[np.ndarray]:
  """For central inference: actor `actor_index`'s Ape-X epsilons as the
  policy's `epsilon` argument ([E, 1] float32, as its own policy holds
  them), or None without `dqn.apex_epsilons` (every actor's policy is the
  same)."""
  fixed = actor_epsilons(config, actor_index)
  return None if fixed is None else np.asarray(fixed, np.float32)[:, None]


def make_policy(config: ml_collections.ConfigDict,
                networks: networks_lib.FeedForwardNetwork,
                environment_spec: specs.EnvironmentSpec, evaluation: bool,
                actor_index: Optional[int] = None):
  """Epsilon-greedy on the Q-values, for one observation or a batch of them.

  `builder.make_actor` calls it as (params, key, observation, epsilon), with
  the per-episode epsilon its actor core draws from `config.dqn.epsilon`;
  the batched actor loop (`envs_per_actor` > 1) calls it as (params, key,
  observations) on stacked observations, and the default epsilon applies.
  The evaluator always uses `config.dqn.eval_epsilon`. With
  `dqn.apex_epsilons`, actor `actor_index` always uses its own Ape-X
  epsilons, one per environment of its batch (the first with one env).
  """
  observation_rank = len(environment_spec.observations.shape)
  default_epsilon = (config.dqn.eval_epsilon if evaluation
                     else config.dqn.epsilon)
  fixed = None if evaluation else actor_epsilons(config, actor_index)

  def policy(params, key, observation, epsilon=default_epsilon):
    if evaluation:
      epsilon = default_epsilon
    unbatched = observation.ndim == observation_rank
    if fixed is not None:  # [E, 1]: broadcast over each row's Q-values.
      epsilon = (float(fixed[0]) if unbatched
                 else jnp.asarray(fixed, jnp.float32)[:, None])
    if unbatched:
      observation = utils.add_batch_dim(observation)
    q_values = networks.apply(params, observation)
    actions = rlax.epsilon_greedy(epsilon).sample(key, q_values)
    return utils.squeeze_batch_dim(actions) if unbatched else actions

  return policy
