"""The config saved in a run directory (its config.json), loaded as a
config file.

`--resume=DIR` without --config loads DIR's saved config through this file
(`--config=THIS_FILE:DIR`, options.py rewrites the command line), so that
ml_collections' config_flags applies --config.FIELD=VALUE overrides to it
with the same parsing and the same errors as to a named config: raising a
finished run's budget is `--resume=DIR --config.max_actor_steps=N`.
"""

from typing import Optional

import ml_collections

from acme_launch import layout
from acme_launch.config import schema


def read(run_dir: str) -> Optional[dict]:
  """RUN_DIR/config.json as saved (None if there is none)."""
  return layout.read_json(layout.config_path(run_dir))


def config_of(saved: dict) -> ml_collections.ConfigDict:
  """The experiment config of a saved config.json, with the shared fields
  added since it was written (schema.add_missing_fields)."""
  config = ml_collections.ConfigDict(saved['config'])
  schema.add_missing_fields(config)
  return config


def get_config(run_dir: str) -> ml_collections.ConfigDict:
  """config_flags' entry: the config saved in `run_dir`."""
  return config_of(read(run_dir))
