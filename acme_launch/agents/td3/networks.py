"""TD3's networks, sized by `config.network`, and its policies (Acme's)."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import td3
import ml_collections


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> td3.TD3Networks:
  return td3.make_networks(
      environment_spec, hidden_layer_sizes=tuple(config.network.hidden_layers))


def make_policy(config: ml_collections.ConfigDict, networks: td3.TD3Networks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  # Gaussian exploration noise `sigma`, clipped to the action bounds; none
  # when evaluating (what Acme's DistributedTD3 evaluator does).
  return td3.get_default_behavior_policy(
      networks, action_specs=environment_spec.actions,
      sigma=0.0 if evaluation else config.td3.sigma)
