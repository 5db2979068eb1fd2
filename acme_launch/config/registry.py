"""Config registry: names in `configs/` -> config files.

A registry name is the file name without `.py`; its one-line description is
the first line of the file's docstring. `--config=NAME` and
`--config=path/to/file.py` both work.
"""

import ast
import os
from typing import Dict, Optional

# Shipped with the package (acme_launch/configs/), so an installed launcher
# finds them too; the checkout's top-level `configs` links there.
CONFIGS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'configs')


def available() -> Dict[str, str]:
  """Maps every registry name to its config file path."""
  names = {}
  for filename in sorted(os.listdir(CONFIGS_DIR)):
    if filename.endswith('.py') and not filename.startswith('_'):
      names[filename[:-3]] = os.path.join(CONFIGS_DIR, filename)
  return names


def description(path: str) -> str:
  """First docstring line of a config file, read without importing it."""
  with open(path) as f:
    docstring = ast.get_docstring(ast.parse(f.read())) or ''
  return docstring.strip().splitlines()[0] if docstring.strip() else ''


def resolve(name_or_path: str) -> Optional[str]:
  """A config file path for a registry name or an existing path, else None."""
  configs = available()
  if name_or_path in configs:
    return configs[name_or_path]
  if name_or_path.endswith('.py') and os.path.isfile(name_or_path):
    return os.path.abspath(name_or_path)
  return None


def is_shipped(path: str) -> bool:
  """Whether a config file is one of the package's own."""
  return (os.path.dirname(os.path.realpath(path)) ==
          os.path.realpath(CONFIGS_DIR))


def load(name_or_path: str):
  """The ConfigDict of a registry name or config file path (for the Python
  API); LaunchError if there is none."""
  import importlib.util
  from acme_launch import errors
  path = resolve(name_or_path)
  if path is None:
    raise errors.LaunchError(
        f'unknown config {name_or_path!r}; choose one of: '
        f'{", ".join(available())} (or a path to a .py file)')
  spec = importlib.util.spec_from_file_location(
      f'acme_launch_config_{os.path.splitext(os.path.basename(path))[0]}',
      path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def listing() -> str:
  """One line per registry config: name and description."""
  configs = available()
  width = max(map(len, configs))
  return '\n'.join(f'{name:<{width}}  {description(path)}'
                   for name, path in configs.items())
