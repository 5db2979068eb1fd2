"""SAC's networks, sized by `config.network`, and its policies (Acme's)."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import sac
import ml_collections


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> sac.SACNetworks:
  return sac.make_networks(
      environment_spec, hidden_layer_sizes=tuple(config.network.hidden_layers))


def make_policy(config: ml_collections.ConfigDict, networks: sac.SACNetworks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  del config, environment_spec  # SAC's policy needs neither.
  # Evaluation takes the mode of the policy distribution; actors sample it.
  return sac.apply_policy_and_sample(networks, eval_mode=evaluation)
