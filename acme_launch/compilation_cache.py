"""JAX's persistent compilation cache, shared by runs on one machine.

A node's jitted functions (the learner's update, the actors' and the
evaluator's policies) take seconds to compile, and the same config compiles
the same functions every run. With the cache, a node compiles each function
once per machine, JAX version and shape; later runs, restarted nodes and the
other actors of the run read it back.

The launcher checks the folder (`usable`) before any process starts and hands
it to every node in its NodeEnv; the node turns the cache on (`enable`)
before anything compiles. Runs may share the folder while they run: JAX's
cache reads and writes its entries under a file lock (it takes one when the
cache has a size limit, which `enable` always sets), so no process reads an
entry another is still writing. Problems with the folder (not writable, full)
never stop a run: it goes on without the cache. A folder that others could
change (not the user's, writable by others, a link) is never used: its code
would run in every node (an explicit --compilation_cache is refused before
launch, see prepare.py).
"""

import os
import shutil
import tempfile
from typing import Tuple

from acme_launch import errors
from acme_launch import safe_dirs

# Oldest entries are evicted past this size (it is also what makes JAX lock).
MAX_BYTES = 2 * 2**30
# Fewer free bytes than this on the folder's filesystem: no cache.
MIN_FREE_BYTES = 64 * 2**20


def default_dir() -> str:
  """$XDG_CACHE_HOME/acme-launch/jax, or ~/.cache/acme-launch/jax."""
  base = os.environ.get('XDG_CACHE_HOME') or os.path.join(
      os.path.expanduser('~'), '.cache')
  return os.path.join(base, 'acme-launch', 'jax')


def usable(path: str) -> Tuple[str, str]:
  """(the folder, '') if the cache can live in `path`, else ('', why).

  Creates the folder (private to the user), checks that nobody else can
  change it or swap it (safe_dirs.py: the nodes load the compiled code it
  holds), and writes and removes a probe file in it, so that an unwritable
  folder or a full disk shows here.
  """
  path = os.path.abspath(os.path.expanduser(path))
  try:
    os.makedirs(path, mode=0o700, exist_ok=True)
    fd = safe_dirs.open_checked(path, 'compilation cache folder',
                                'folder holding the compilation cache')
    try:
      with tempfile.NamedTemporaryFile(dir=path, prefix='.probe-'):
        pass
      free = shutil.disk_usage(path).free
      if not safe_dirs.is_same_folder(path, fd):
        return '', f'{path}: replaced while it was checked'
    finally:
      os.close(fd)
  except OSError as e:
    return '', f'{path}: {e.strerror or e}'
  except errors.LaunchError as e:
    return '', str(e)
  if free < MIN_FREE_BYTES:
    return '', f'{path}: only {free / 2**20:.0f} MiB free'
  return path, ''


def enable(path: str) -> str:
  """Turns JAX's persistent cache on at `path` ('default': default_dir())
  in this process; '' if it did, else why not (the process then compiles
  as usual). Call it before anything is compiled."""
  path, why = usable(default_dir() if path == 'default' else path)
  if not path:
    return why
  import jax
  jax.config.update('jax_compilation_cache_dir', path)
  jax.config.update('jax_compilation_cache_max_size', MAX_BYTES)
  # Small functions too: a node compiles dozens, each well under JAX's
  # default threshold of one second, and together they take seconds.
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  return ''
