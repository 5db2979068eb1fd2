"""PPO's networks, sized by `config.network` (Acme's gym networks, or the
same with the observations normalized first), and its policy."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import ppo
import ml_collections

from acme_launch.agents.ppo import normalization


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> ppo.PPONetworks:
  if normalization.normalizes(config):
    return normalization.make_normalized_networks(
        environment_spec, tuple(config.network.policy_layers),
        tuple(config.network.value_layers))
  return ppo.make_gym_networks(
      environment_spec,
      policy_layer_sizes=tuple(config.network.policy_layers),
      value_layer_sizes=tuple(config.network.value_layers))


def make_policy(config: ml_collections.ConfigDict, networks: ppo.PPONetworks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  del config, environment_spec  # PPO's policy needs neither.
  return ppo.make_inference_fn(networks, evaluation)
