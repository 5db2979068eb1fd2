"""Acme's JAX D4PG (dm-acme 0.4.0) from a `config.d4pg` section."""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import d4pg
from acme.utils import loggers
import ml_collections

from acme_launch.agents import replay_fields

# Its learner uses one device (dm-acme 0.4.0's learning.py has no pmap), its
# actors fetch the learner's 'policy' variables, its policy returns actions
# alone, and a batched actor writes through one of the builder's adders per
# environment: the defaults of agents/__init__.py, so nothing is declared.


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> d4pg.D4PGBuilder:
  del environment_spec  # D4PG's config needs nothing from it.
  replay_fields.check('d4pg', config.d4pg)
  return d4pg.D4PGBuilder(d4pg.D4PGConfig(**config.d4pg.to_dict()),
                          logger_fn=learner_logger_fn)


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


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay: n-step transitions, one item per step (plan/replay_memory.py)."""
  return replay_fields.transition_tables('d4pg', config, environment_spec,
                                         d4pg.D4PGConfig)
