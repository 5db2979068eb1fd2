"""DQN's builder: Acme's JAX DQNBuilder (dm-acme 0.4.0) from `config.dqn`,
with Acme's `PrioritizedDoubleQLearning` loss on n-step transitions from a
prioritized Reverb table."""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import dqn
from acme.utils import loggers
import ml_collections

from acme_launch import errors
from acme_launch.agents import images
from acme_launch.agents import replay_fields

# Fields of `config.dqn` that are not DQNConfig fields: the adapter maps them.
ADAPTER_FIELDS = ('eval_epsilon', 'apex_epsilons')


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
  fields = {k: v for k, v in config.dqn.items() if k not in ADAPTER_FIELDS}
  dqn_config = dqn.DQNConfig(**fields)
  loss_fn = dqn.PrioritizedDoubleQLearning(
      discount=dqn_config.discount,
      importance_sampling_exponent=dqn_config.importance_sampling_exponent)
  return dqn.DQNBuilder(dqn_config, loss_fn, logger_fn=learner_logger_fn)


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay: n-step transitions, one item per step (plan/replay_memory.py)."""
  return replay_fields.transition_tables('dqn', config, environment_spec,
                                         dqn.DQNConfig)
