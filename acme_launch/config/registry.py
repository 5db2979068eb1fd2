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


def listing() -> str:
  """One line per registry config: name and description."""
  configs = available()
  width = max(map(len, configs))
  return '\n'.join(f'{name:<{width}}  {description(path)}'
                   for name, path in configs.items())
