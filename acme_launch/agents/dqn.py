"""Acme's JAX DQN (dm-acme 0.4.0) from a `config.dqn` section.

Double Q-learning on n-step transitions from a prioritized Reverb table
(Acme's `PrioritizedDoubleQLearning` loss), a Q-network from
`config.network`, epsilon-greedy actors (batched ones too) and a (by default
greedy) evaluator. For discrete-action tasks such as CartPole-v1 and
MinAtar's games. With `dqn.apex_epsilons`, each actor's environments
explore with Ape-X's fixed epsilons (`actor_epsilons`) instead of one
`dqn.epsilon`. The Q-network is an MLP (`network.hidden_layers`) on the
flattened observation; on uint8 images (MinAtar's grids, Atari's frames) a
conv torso comes first when `network.conv_channels` names one
(agents/images.py), and the images are scaled to [0, 1] either way.
"""

from typing import Callable, Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import dqn
from acme.jax import networks as networks_lib
from acme.jax import utils
from acme.utils import loggers
import haiku as hk
import jax.numpy as jnp
import ml_collections
import numpy as np
import rlax

from acme_launch import errors
from acme_launch.agents import images
from acme_launch.agents import replay_fields

# One learner device, actions alone from the policy, one of the builder's
# adders per environment: the defaults (agents/__init__.py). Its actors fetch
# the learner's '' variables, as Acme's DQN actor does.
ACTOR_VARIABLES = ''

# Fields of `config.dqn` that are not DQNConfig fields: the adapter maps them.
_ADAPTER_FIELDS = ('eval_epsilon', 'apex_epsilons')

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


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> dqn.DQNBuilder:
  replay_fields.check_discrete_actions('dqn', config, environment_spec)
  replay_fields.check('dqn', config.dqn)
  images.check('dqn', config.network, environment_spec.observations)
  if config.dqn.get('apex_epsilons', False) and config.get(
      'envpool_async_envs', 0):
    raise errors.LaunchError(
        'config.dqn.apex_epsilons gives each environment of an actor its own '
        'epsilon and needs every environment in every step: set '
        'config.envpool_async_envs=0')
  fields = {k: v for k, v in config.dqn.items() if k not in _ADAPTER_FIELDS}
  dqn_config = dqn.DQNConfig(**fields)
  loss_fn = dqn.PrioritizedDoubleQLearning(
      discount=dqn_config.discount,
      importance_sampling_exponent=dqn_config.importance_sampling_exponent)
  return dqn.DQNBuilder(dqn_config, loss_fn, logger_fn=learner_logger_fn)


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec
                  ) -> networks_lib.FeedForwardNetwork:
  """(A conv torso on images, then) an MLP from observations to one
  Q-value per action."""
  num_actions = environment_spec.actions.num_values
  layers = list(config.network.hidden_layers) + [num_actions]
  layout = images.images(config.network, environment_spec.observations)

  def q_network(observation):
    if layout is not None:
      return hk.nets.MLP(layers)(
          images.torso(config.network, layout, observation))
    return hk.Sequential([hk.Flatten(), hk.nets.MLP(layers)])(observation)

  transformed = hk.without_apply_rng(hk.transform(q_network))
  dummy_observation = utils.add_batch_dim(
      utils.zeros_like(environment_spec.observations))
  return networks_lib.FeedForwardNetwork(
      init=lambda key: transformed.init(key, dummy_observation),
      apply=transformed.apply)


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


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay: n-step transitions, one item per step (plan/replay_memory.py)."""
  return replay_fields.transition_tables('dqn', config, environment_spec,
                                         dqn.DQNConfig)
