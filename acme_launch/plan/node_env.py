"""What the launcher hands each node process through its environment: one value.

A node process is started by Launchpad's command line (local_mp, or a Ray
host's actor) and gets nothing from the launcher but its environment, whose
values must be strings. Everything of ours that crosses that boundary is a
field of `NodeEnv`: the planner fills the resource fields (plan/resources.py),
the launcher the run's (run/local_mp/, run/ray/), and both write it with
`to_environ()` or `updated()`; node code reads it with `NodeEnv.from_environ()`
(node/entry.py, layout.on_this_host, program/build.py's seeds, the Ray
address builder). This module is the only one that names the variables,
except the loopback shim's own build settings (run/loopback.py): the shim
itself, in C, reads ACME_LAUNCH_BIND_ADDRESS.

Variables of other programs that the plan sets (CUDA_VISIBLE_DEVICES,
JAX_PLATFORMS, XLA_PYTHON_CLIENT_*, OMP_NUM_THREADS, TF_CPP_MIN_LOG_LEVEL)
are read by those programs, not by ours, and stay plain strings in the plan.
"""

import dataclasses
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from acme_launch import errors

PREFIX = 'ACME_LAUNCH_'
TF_GPU_MODES = ('none', 'growth')   # Or 'limit:<MB>'.


def parse_core_list(text: str) -> Tuple[int, ...]:
  """'0-3,8' -> (0, 1, 2, 3, 8); ValueError if it is not such a list."""
  cores = []
  for item in str(text).replace(' ', '').split(','):
    match = re.fullmatch(r'(\d+)(?:-(\d+))?', item)
    if not match:
      raise ValueError(text)
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else first
    if last < first:
      raise ValueError(text)
    cores.extend(range(first, last + 1))
  if len(set(cores)) != len(cores):
    raise ValueError(text)
  return tuple(cores)


def format_cores(cores: Sequence[int]) -> str:
  """(0, 1, 2, 3, 8) -> '0-3,8', the form `taskset -c` and Linux print."""
  runs: List[List[int]] = []
  for core in sorted(cores):
    if runs and core == runs[-1][1] + 1:
      runs[-1][1] = core
    else:
      runs.append([core, core])
  return ','.join(str(a) if a == b else f'{a}-{b}' for a, b in runs)



@dataclasses.dataclass(frozen=True)
class NodeEnv:
  """One node process's settings from the launcher; defaults = not set."""
  # From the resource plan.
  cpus: Tuple[int, ...] = ()        # Cores to pin every thread to (none: any).
  tf_gpu: str = ''                  # 'none' (also ''), 'growth', 'limit:<MB>'.
  tf_intra_op_threads: int = 0      # 0: TF's default.
  tf_inter_op_threads: int = 0
  # Variables (names or patterns) kept for it that credentials.is_withheld
  # would drop: config.resources.<group>.pass_env. Names only, never values.
  pass_env: Tuple[str, ...] = ()
  # From the launcher.
  node: str = ''                    # 'actor/3'.
  run_dir: str = ''                 # Where it writes (a mirror on a Ray host
  mirror_of: str = ''               # without the run directory: then the
                                    # launcher's run directory is here).
  restart: int = 0                  # 1, 2, ... in a restarted node.
  pdb: bool = False                 # --debug_node --pdb: post-mortem.
  compilation_cache: str = ''       # JAX's persistent cache folder (none: off).
  # A Ray run's node: its host's cluster address (the loopback shim binds
  # servers there), its servers' addresses, the Ray node it was placed on,
  # and after a move the host it left and 'OLD=NEW' server addresses.
  bind_address: str = ''
  server_addresses: Tuple[str, ...] = ()
  ray_node_id: str = ''
  moved_from: str = ''
  moved_addresses: Tuple[Tuple[str, str], ...] = ()

  def to_environ(self) -> Dict[str, str]:
    """The variables for this value: every field that is set, as a string."""
    env = {}
    for field, (name, kind) in _VARIABLES.items():
      value = getattr(self, field)
      if value:
        env[name] = _WRITERS[kind](value)
    return env

  @classmethod
  def from_environ(cls, environ: Optional[Mapping[str, str]] = None
                   ) -> 'NodeEnv':
    """The value in `environ` (default: this process's); LaunchError with
    the variable's name if one cannot be read."""
    environ = os.environ if environ is None else environ
    values = {}
    for field, (name, kind) in _VARIABLES.items():
      text = environ.get(name, '')
      if not text:
        continue
      try:
        values[field] = _READERS[kind](text)
      except ValueError:
        raise errors.LaunchError(
            f'{name} must be {_EXPECTED[kind]}, got {text!r}') from None
    return cls(**values)

  def replace(self, **fields) -> 'NodeEnv':
    return dataclasses.replace(self, **fields)


def updated(environ: Mapping[str, str], **fields) -> Dict[str, str]:
  """`environ` with these NodeEnv fields set, the others kept: how the
  launcher adds its fields to a command's environment from the plan."""
  rest = {k: v for k, v in environ.items() if not k.startswith(PREFIX)}
  kept = {k: v for k, v in environ.items()
          if k.startswith(PREFIX) and k not in _NAMES}
  value = NodeEnv.from_environ(environ).replace(**fields)
  return {**rest, **kept, **value.to_environ()}


def is_ours(name: str) -> bool:
  """Whether an environment variable is one only the launcher may set."""
  return name.startswith(PREFIX)


def _tf_gpu(text: str) -> str:
  text = text.strip().lower()
  if text in TF_GPU_MODES:
    return text
  if text.startswith('limit:') and text[6:].isdigit() and int(text[6:]) > 0:
    return text
  raise ValueError(text)


def _count(text: str) -> int:
  if not text.isdigit():
    raise ValueError(text)
  return int(text)


def _pairs(text: str) -> Tuple[Tuple[str, str], ...]:
  pairs = []
  for pair in filter(None, text.split(',')):
    old, sep, new = pair.partition('=')
    if not sep:
      raise ValueError(text)
    pairs.append((old, new))
  return tuple(pairs)


_READERS = {
    'str': str, 'int': _count, 'bool': lambda t: t == '1',
    'cores': parse_core_list, 'tf_gpu': _tf_gpu,
    'list': lambda t: tuple(a for a in t.split(',') if a), 'pairs': _pairs,
}
_WRITERS = {
    'str': str, 'int': str, 'bool': lambda v: '1', 'cores': format_cores,
    'tf_gpu': str, 'list': ','.join,
    'pairs': lambda v: ','.join(f'{old}={new}' for old, new in v),
}
_EXPECTED = {
    'int': 'a non-negative integer', 'cores': "a core list like '0-3,8'",
    'tf_gpu': "'none', 'growth' or 'limit:<MB>'",
    'pairs': "'OLD=NEW' pairs separated by ','",
}
_VARIABLES = {   # field -> (variable, kind)
    'cpus': (PREFIX + 'CPUS', 'cores'),
    'tf_gpu': (PREFIX + 'TF_GPU', 'tf_gpu'),
    'tf_intra_op_threads': (PREFIX + 'TF_INTRA_OP_THREADS', 'int'),
    'tf_inter_op_threads': (PREFIX + 'TF_INTER_OP_THREADS', 'int'),
    'pass_env': (PREFIX + 'PASS_ENV', 'list'),
    'node': (PREFIX + 'NODE', 'str'),
    'run_dir': (PREFIX + 'RUN_DIR', 'str'),
    'mirror_of': (PREFIX + 'MIRROR_OF', 'str'),
    'restart': (PREFIX + 'NODE_RESTART', 'int'),
    'pdb': (PREFIX + 'PDB', 'bool'),
    'compilation_cache': (PREFIX + 'COMPILATION_CACHE', 'str'),
    'bind_address': (PREFIX + 'BIND_ADDRESS', 'str'),
    'server_addresses': (PREFIX + 'SERVER_ADDRESSES', 'list'),
    'ray_node_id': (PREFIX + 'RAY_NODE_ID', 'str'),
    'moved_from': (PREFIX + 'MOVED_FROM', 'str'),
    'moved_addresses': (PREFIX + 'MOVED_ADDRESSES', 'pairs'),
}
_NAMES = frozenset(name for name, _ in _VARIABLES.values())


def variable(field: str) -> str:
  """The environment variable of a NodeEnv field (for messages and tests)."""
  return _VARIABLES[field][0]
