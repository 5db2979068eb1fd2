"""SAC's builder: Acme's JAX SACBuilder (dm-acme 0.4.0) from `config.sac`.

Derived here from the environment spec: SAC's `target_entropy`, as
`target_entropy_per_dimension` times the number of action dimensions (-1 per
dimension is Acme's usual heuristic, -|A|).
"""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import sac
from acme.utils import loggers
import ml_collections

from acme_launch.agents import replay_fields

# Fields of `config.sac` that are not SACConfig fields: the adapter maps them.
ADAPTER_FIELDS = ('target_entropy_per_dimension', 'adaptive_entropy',
                  'entropy_coefficient')


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> sac.SACBuilder:
  replay_fields.check('sac', config.sac)
  fields = {k: v for k, v in config.sac.items() if k not in ADAPTER_FIELDS}
  sac_config = sac.SACConfig(
      **fields,
      target_entropy=float(sac.target_entropy_from_env_spec(
          environment_spec, config.sac.target_entropy_per_dimension)),
      # None makes Acme learn the coefficient toward target_entropy.
      entropy_coefficient=(None if config.sac.adaptive_entropy
                           else config.sac.entropy_coefficient))
  return sac.SACBuilder(sac_config, logger_fn=learner_logger_fn)


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay: n-step transitions, one item per step (plan/replay_memory.py)."""
  return replay_fields.transition_tables('sac', config, environment_spec,
                                         sac.SACConfig)
