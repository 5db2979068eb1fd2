"""Deprecated: the old name of config/schema.py, kept so that config files
written against it (`from acme_launch import experiment_config`) still load,
with a warning naming the new import. Removed in 0.3.0 (CHANGELOG.md).
New configs: `from acme_launch.config import schema`."""

import warnings

from acme_launch import errors
from acme_launch.config import schema

warnings.warn(
    'acme_launch.experiment_config is deprecated and goes in 0.3.0: use '
    '`from acme_launch.config import schema` (the same functions)',
    errors.DeprecatedName, stacklevel=2)


def __getattr__(name: str):
  """Every public name of config/schema.py, as before."""
  if name.startswith('_'):
    raise AttributeError(name)
  return getattr(schema, name)
