"""D4PG's builder: Acme's JAX D4PGBuilder (dm-acme 0.4.0) from `config.d4pg`."""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import d4pg
from acme.utils import loggers
import ml_collections

from acme_launch.agents import replay_fields


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> d4pg.D4PGBuilder:
  del environment_spec  # D4PG's config needs nothing from it.
  replay_fields.check('d4pg', config.d4pg)
  return d4pg.D4PGBuilder(d4pg.D4PGConfig(**config.d4pg.to_dict()),
                          logger_fn=learner_logger_fn)


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay: n-step transitions, one item per step (plan/replay_memory.py)."""
  return replay_fields.transition_tables('d4pg', config, environment_spec,
                                         d4pg.D4PGConfig)


def saved_variables(state, name: str):
  """What D4PG's learner serves its actors, from its saved state: Acme's
  D4PG learner hands out its target networks (`target_policy_params` for
  'policy'), not the online ones."""
  return {'policy': state.target_policy_params,
          'critic': state.target_critic_params}[name]
