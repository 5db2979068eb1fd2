"""D4PG's networks, sized by `config.network`, and its policies (Acme's)."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import d4pg
import ml_collections


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> d4pg.D4PGNetworks:
  return d4pg.make_networks(
      environment_spec,
      policy_layer_sizes=tuple(config.network.policy_layers),
      critic_layer_sizes=tuple(config.network.critic_layers),
      vmin=config.network.vmin, vmax=config.network.vmax,
      num_atoms=config.network.num_atoms)


def make_policy(config: ml_collections.ConfigDict, networks: d4pg.D4PGNetworks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  del environment_spec  # The environment clips actions to their bounds.
  if evaluation:
    return d4pg.get_default_eval_policy(networks)
  # Gaussian exploration noise `sigma` on the deterministic policy.
  return d4pg.get_default_behavior_policy(
      networks, d4pg.D4PGConfig(**config.d4pg.to_dict()))
