"""A run directory holding a config's learner checkpoint, made in this
process without a program: what `evaluate` and `export` read, for tests
and bench/ (bench/evaluate.py).

The agent's real learner, made by its builder (never stepped: no replay),
saved by the run's own checkpointer (program/checkpointing.py), beside the
config.json a run writes.
"""

import json
import os
from typing import Dict, Optional, Sequence

from acme_launch import compat  # noqa: F401  JAX aliases; before acme
from acme import specs
from acme.utils import counting
from acme.utils import loggers
import jax

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch import layout
from acme_launch.config import registry
from acme_launch.program import checkpointing


def load_config(config_name: str, overrides: Optional[Dict] = None):
  """The config with `overrides` ({'network.lstm_size': 8}) applied."""
  config = registry.load(config_name)
  for field, value in (overrides or {}).items():
    section, _, name = field.rpartition('.')
    (config[section] if section else config)[name] = value
  return config


def make_learner(config):
  """(adapter, environment spec, learner) of a config."""
  adapter = agents.load(config.agent)
  spec = specs.make_environment_spec(
      environments.make_environment(config.env_name, 0))
  builder = adapter.make_builder(
      config, learner_logger_fn=lambda *a, **k: loggers.NoOpLogger(),
      environment_spec=spec)
  learner = builder.make_learner(
      jax.random.PRNGKey(0), adapter.make_networks(config, spec), iter(()),
      None, counting.Counter())
  return adapter, spec, learner


def make_run_dir(run_dir: str, config, python_path: Sequence[str] = (),
                 evaluator_seed: int = 17,
                 final_eval_seeds: Optional[str] = 'consecutive') -> str:
  """RUN_DIR with config.json and the learner's checkpoint of `config`.
  `final_eval_seeds`: the scheme config.json records (the driver's); None:
  none, as in a run made before the record."""
  _, _, learner = make_learner(config)
  os.makedirs(layout.component_dir(run_dir, 'learner'))
  saved = {'config_name': 'test', 'config': config.to_dict(),
           'python_path': list(python_path),
           'node_seeds': {'evaluator/0': evaluator_seed}}
  if final_eval_seeds:
    saved['final_eval_seeds'] = final_eval_seeds
  with open(layout.config_path(run_dir), 'w') as f:
    json.dump(saved, f)
  checkpointing.Checkpointer(learner, layout.component_dir(run_dir, 'learner'),
                             config.checkpoint).save(force=True)
  return run_dir
