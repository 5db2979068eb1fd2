"""A bench/ script imported as a module, for tests that reuse its measures.

The scripts in bench/ are run as `python bench/NAME.py`, so they import each
other by bare name (bench/ is their sys.path[0]), and bench/replay_memory.py
starts its Reverb server with multiprocessing's spawn, whose child imports
the server function by that bare name again. Loading one from its file path
alone would break both; so this puts bench/ on sys.path as running the
script does, once, here rather than in each test.
"""

import importlib
import os
import sys
from types import ModuleType

from acme_launch import paths

BENCH_DIR = os.path.join(paths.ROOT, 'bench')


def load(name: str) -> ModuleType:
  """bench/<name>.py as the module `name`, with bench/ on sys.path."""
  if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)
  module = importlib.import_module(name)
  where = os.path.dirname(os.path.abspath(getattr(module, '__file__', '') or ''))
  if where != BENCH_DIR:
    raise ImportError(f'{name!r} is {module!r}, not bench/{name}.py')
  return module
