"""The config saved in a run directory (its config.json), loaded as a
config file.

`--resume=DIR` without --config loads DIR's saved config through this file
(`--config=THIS_FILE:DIR`, options.py rewrites the command line), so that
ml_collections' config_flags applies --config.FIELD=VALUE overrides to it
with the same parsing and the same errors as to a named config: raising a
finished run's budget is `--resume=DIR --config.max_actor_steps=N`.
"""

import json
import os
from typing import Optional

import ml_collections

from acme_launch import errors
from acme_launch import safe_dirs
from acme_launch.config import schema


def read(run_dir: str, what: str = 'run directory') -> Optional[dict]:
  """RUN_DIR/config.json as saved (None if the folder or the file is not
  there). Read only from a run directory that passes safe_dirs' checks,
  without following links: its agent module and python_path are imported
  by the launcher and every node. LaunchError if it fails them, or if the
  file is not a saved config (`what` names the folder in messages)."""
  data = safe_dirs.read_file(run_dir, 'config.json', what)
  if data is None:
    return None
  path = os.path.join(os.path.abspath(run_dir), 'config.json')
  try:
    saved = json.loads(data)
  except ValueError:
    saved = None
  if not (isinstance(saved, dict) and isinstance(saved.get('config'), dict)
          and isinstance(saved.get('config_name', ''), str)
          and _is_folder_list(saved.get('python_path', []))):
    raise errors.LaunchError(
        f'{path} is not a saved run config (a JSON object with a "config" '
        'object); pass --config to resume with a config of yours')
  return saved


def _is_folder_list(value) -> bool:
  return isinstance(value, list) and all(isinstance(p, str) for p in value)


def _as_written(value):
  """A config value as the config file wrote it: JSON keeps tuples as
  lists, and config_flags takes overrides only of tuple fields."""
  if isinstance(value, dict):
    return {key: _as_written(item) for key, item in value.items()}
  if isinstance(value, list):
    return tuple(_as_written(item) for item in value)
  return value


def config_of(saved: dict) -> ml_collections.ConfigDict:
  """The experiment config of a saved config.json, its lists tuples again
  (the configs' sequences are tuples), with the shared fields added since
  it was written (schema.add_missing_fields)."""
  try:
    config = ml_collections.ConfigDict(_as_written(saved['config']))
  except (TypeError, ValueError, KeyError, AttributeError) as e:
    raise errors.LaunchError(
        f'the saved config is not a config: {" ".join(str(e).split())[:200]}'
    ) from None
  schema.add_missing_fields(config)
  return config


def get_config(run_dir: str) -> ml_collections.ConfigDict:
  """config_flags' entry: the config saved in `run_dir`."""
  return config_of(read(run_dir))
