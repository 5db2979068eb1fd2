"""TD3's builder: Acme's JAX TD3 (dm-acme 0.4.0) from `config.td3`.

dm-acme 0.4.0's TD3Builder does not hand `delay` and `tau` to its learner (the
learner's defaults, 2 and 0.005, always apply); the builder here does, so the
config fields mean what they say.
"""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import td3
from acme.utils import loggers
import ml_collections
import optax

from acme_launch.agents import replay_fields


class TD3Builder(td3.TD3Builder):
  """Acme's TD3Builder, with `delay` and `tau` reaching the learner."""

  def make_learner(self, random_key, networks, dataset, replay_client=None,
                   counter=None):
    config = self._config
    policy_optimizer = optax.adam(config.policy_learning_rate)
    if config.policy_gradient_clipping is not None:
      policy_optimizer = optax.chain(
          optax.clip_by_global_norm(config.policy_gradient_clipping),
          policy_optimizer)
    return td3.TD3Learner(
        networks=networks,
        random_key=random_key,
        discount=config.discount,
        iterator=dataset,
        policy_optimizer=policy_optimizer,
        critic_optimizer=optax.adam(config.critic_learning_rate),
        twin_critic_optimizer=optax.adam(config.critic_learning_rate),
        delay=config.delay,
        target_sigma=config.target_sigma,
        noise_clip=config.noise_clip,
        tau=config.tau,
        counter=counter,
        logger=self._logger_fn(),
        num_sgd_steps_per_step=config.num_sgd_steps_per_step)


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> TD3Builder:
  del environment_spec  # TD3's config needs nothing from it.
  replay_fields.check('td3', config.td3)
  return TD3Builder(td3.TD3Config(**config.td3.to_dict()),
                    logger_fn=learner_logger_fn)


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay: n-step transitions, one item per step (plan/replay_memory.py)."""
  return replay_fields.transition_tables('td3', config, environment_spec,
                                         td3.TD3Config)
