"""A user's own agent: Acme's JAX DQN with a dueling Q-network of our own.

acme-launch ships DQN with an MLP; this module brings its own network (a
shared torso, then separate value and advantage heads: Wang et al., 2016)
and runs on Acme's `DQNBuilder` unchanged. It is a complete adapter: the
three functions acme-launch calls, and nothing else. Its settings are the
config's `dueling_dqn` section (the last part of the module's name).
"""

from acme import specs
from acme.agents.jax import dqn
from acme.jax import networks as networks_lib
from acme.jax import utils
import haiku as hk
import jax.numpy as jnp
import rlax


def make_builder(config, learner_logger_fn, environment_spec):
  """Acme's DQN builder with its double-Q loss on prioritized replay."""
  section = config.dueling_dqn
  dqn_config = dqn.DQNConfig(
      learning_rate=section.learning_rate, batch_size=section.batch_size,
      n_step=section.n_step, discount=section.discount,
      min_replay_size=section.min_replay_size,
      max_replay_size=section.max_replay_size,
      samples_per_insert=section.samples_per_insert,
      epsilon=section.epsilon)
  loss_fn = dqn.PrioritizedDoubleQLearning(
      discount=dqn_config.discount,
      importance_sampling_exponent=dqn_config.importance_sampling_exponent)
  return dqn.DQNBuilder(dqn_config, loss_fn, logger_fn=learner_logger_fn)


def make_networks(config, environment_spec: specs.EnvironmentSpec):
  """Observations -> one Q-value per action, as value + centred advantage."""
  num_actions = environment_spec.actions.num_values
  hidden = list(config.dueling_dqn.hidden_layers)

  def q_network(observation):
    torso = hk.nets.MLP(hidden, activate_final=True)(hk.Flatten()(observation))
    value = hk.Linear(1)(torso)
    advantages = hk.Linear(num_actions)(torso)
    return value + advantages - jnp.mean(advantages, axis=-1, keepdims=True)

  transformed = hk.without_apply_rng(hk.transform(q_network))
  dummy = utils.add_batch_dim(utils.zeros_like(environment_spec.observations))
  return networks_lib.FeedForwardNetwork(
      init=lambda key: transformed.init(key, dummy), apply=transformed.apply)


def make_policy(config, networks, environment_spec, evaluation):
  """Epsilon-greedy on the Q-values; greedy-ish when evaluating.

  Acme's DQN actor calls it as (params, key, observation, epsilon); an actor
  stepping several environments calls it as (params, key, observations).
  """
  rank = len(environment_spec.observations.shape)
  default = 0.0 if evaluation else config.dueling_dqn.epsilon

  def policy(params, key, observation, epsilon=default):
    if evaluation:
      epsilon = default
    unbatched = observation.ndim == rank
    if unbatched:
      observation = utils.add_batch_dim(observation)
    actions = rlax.epsilon_greedy(epsilon).sample(
        key, networks.apply(params, observation))
    return utils.squeeze_batch_dim(actions) if unbatched else actions

  return policy
