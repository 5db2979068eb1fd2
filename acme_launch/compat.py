"""JAX names that dm-acme 0.4.0 still uses, restored on a newer JAX.

dm-acme 0.4.0 was written against JAX 0.3, and refers at import time (in type
annotations and isinstance checks) to names JAX has since removed. Importing
this module before `acme` puts them back as aliases of their successors.

Every process must import it before acme: each of our modules that imports
acme imports this one first, and Launchpad's child processes start through
`acme_launch.node.entry`, which imports it before unpickling the program.
Importing it also imports gym quietly (import_gym_quietly below). Plain
`import acme_launch` and the config and plan subpackages do neither.
"""

import contextlib
import io
import os
import warnings

# The launcher itself never needs an accelerator; child processes get their
# own JAX_PLATFORMS from the resource plan before this module runs.
os.environ.setdefault('JAX_PLATFORMS', 'cpu')

import jax
import jax.numpy as jnp
from jax.interpreters import pxla as _pxla
from jax.interpreters import xla as _xla

# Old name -> (module object, attribute, replacement).
_ALIASES = (
    (jax, 'tree_multimap', jax.tree_util.tree_map),
    (jnp, 'DeviceArray', jax.Array),
    (_xla, 'DeviceArray', jax.Array),
    (_xla, 'Device', jax.Device),
    (_pxla, 'ShardedDeviceArray', jax.Array),
)


def apply() -> None:
  """Installs the aliases; idempotent, and never overrides a real name."""
  for module, name, replacement in _ALIASES:
    if not hasattr(module, name):
      setattr(module, name, replacement)
  # acme writes `jax.xla.X` and `jax.pxla.X`: JAX 0.4.30 no longer exposes
  # these submodules as attributes of the top-level package.
  if not hasattr(jax, 'xla'):
    jax.xla = _xla
  if not hasattr(jax, 'pxla'):
    jax.pxla = _pxla


apply()


def import_gym_quietly() -> None:
  """`import gym` without the banner gym-notices prints to stderr.

  gym 0.25 prints it at import; acme's wrappers and envpool import gym, so
  every process imports it here first, with the aliases.
  """
  # gym also installs a 'once' filter for every DeprecationWarning at import:
  # catch_warnings puts the process's filters back afterwards.
  try:
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
      import gym  # noqa: F401  (imported for its banner's side effects)
  except ImportError:
    pass


import_gym_quietly()
