"""Commands run as another user of this host, from a test suite run as root.

`setpriv --reuid=U --regid=U --clear-groups` drops root for the command.
The virtualenv's interpreter may live where other users cannot reach it
(pyenv's under /root, mode 0700, on these machines): then the command runs
in a private mount namespace where each such folder is covered by a view
holding only what the interpreter and the checkout need, bind-mounted from
the original (the original's permissions are untouched, and nothing but the
mounts differs; the network, /proc and /tmp are the host's).
"""

import os
import shlex
import shutil
import stat
import sys
import tempfile
from typing import Dict, List, Sequence, Set

import psutil

from tests.conftest import REPO_ROOT

NOBODY = 65534     # The other user: `nobody`, in no group of the run's.
ORDINARY = 1000    # An ordinary user to run the launcher as.


def why_not() -> str:
  """'' where this process can run commands as other users; else why not."""
  if os.geteuid() != 0:
    return 'running commands as other users needs root'
  missing = [t for t in ('setpriv', 'unshare', 'mount') if not shutil.which(t)]
  if missing:
    return f'missing {", ".join(missing)}'
  return ''


def _hidden(paths: Sequence[str]) -> Dict[str, Set[str]]:
  """Folders on the way to `paths` that other users cannot enter -> the
  entries of each that the paths go through."""
  hidden: Dict[str, Set[str]] = {}
  for path in paths:
    parts = os.path.realpath(path).strip(os.sep).split(os.sep)
    folder = os.sep
    for part in parts:
      mode = os.stat(folder).st_mode
      if not mode & stat.S_IXOTH:
        hidden.setdefault(folder, set()).add(part)
        break
      folder = os.path.join(folder, part)
  return hidden


def command(uid: int, argv: Sequence[str], scratch: str) -> List[str]:
  """`argv` as user `uid` (group `uid`, no other group), with this
  interpreter and checkout reachable; `scratch` holds the views (root's)."""
  setpriv = ['setpriv', f'--reuid={uid}', f'--regid={uid}', '--clear-groups']
  hidden = _hidden([sys.executable, sys.prefix, sys.base_prefix, REPO_ROOT])
  if not hidden:
    return [*setpriv, *argv]
  steps = []
  for folder, entries in sorted(hidden.items()):
    view = tempfile.mkdtemp(dir=scratch, prefix='view-')
    os.chmod(view, 0o755)
    for entry in sorted(entries):
      source, target = os.path.join(folder, entry), os.path.join(view, entry)
      if os.path.isdir(source):
        os.mkdir(target)
      else:
        open(target, 'w').close()
      steps.append(f'mount --bind {shlex.quote(source)} {shlex.quote(target)}')
    steps.append(f'mount --rbind {shlex.quote(view)} {shlex.quote(folder)}')
  script = ' && '.join(steps) + ' && exec "$@"'
  return ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', script,
          'sh', *setpriv, *argv]


def shared_folder() -> str:
  """A new temporary folder (root's) that every user may enter: parent of
  the folders of the users of one test; the caller removes it."""
  path = tempfile.mkdtemp(prefix='acme-launch-users-')
  os.chmod(path, 0o755)
  return path


def home_of(uid: int, parent: str = '') -> str:
  """A new folder owned by `uid` alone (mode 0700), for its HOME or a
  workdir, under `parent` (default: the system's temporary folder)."""
  path = tempfile.mkdtemp(prefix=f'acme-launch-uid{uid}-', dir=parent or None)
  os.chown(path, uid, uid)
  return path


def environment(home: str, extra=None) -> dict:
  """This process's environment for a command of another user: its own
  HOME, no bytecode written into the checkout it cannot write anyway."""
  env = {k: v for k, v in os.environ.items()
         if k not in ('TF_CPP_MIN_LOG_LEVEL', 'XDG_CACHE_HOME',
                      'XDG_CONFIG_HOME', 'PYTEST_CURRENT_TEST')}
  env.update(HOME=home, PYTHONDONTWRITEBYTECODE='1', **(extra or {}))
  return env


def listeners(pid: int) -> Set:
  """(address, port) every descendant of `pid` listens on over TCP (as seen
  from its own network namespace)."""
  found = set()
  for process in psutil.Process(pid).children(recursive=True):
    try:
      found.update((c.laddr.ip, c.laddr.port)
                   for c in process.connections('tcp')
                   if c.status == psutil.CONN_LISTEN)
    except psutil.Error:
      pass
  return found
