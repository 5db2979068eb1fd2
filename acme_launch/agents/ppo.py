"""Acme's JAX PPO (dm-acme 0.4.0) from a `config.ppo` section."""

from typing import Callable

from acme import specs
from acme.agents.jax import ppo
from acme.utils import loggers
import ml_collections


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger]
                 ) -> ppo.PPOBuilder:
  ppo_config = ppo.PPOConfig(**config.ppo.to_dict())
  return ppo.PPOBuilder(ppo_config, logger_fn=learner_logger_fn)


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> ppo.PPONetworks:
  return ppo.make_gym_networks(
      environment_spec,
      policy_layer_sizes=tuple(config.network.policy_layers),
      value_layer_sizes=tuple(config.network.value_layers))


def make_policy(networks: ppo.PPONetworks, evaluation: bool):
  return ppo.make_inference_fn(networks, evaluation)
