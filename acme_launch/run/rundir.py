"""The launcher's side of the run directory: create it, take it, check it.

The layout itself (paths, atomic JSON) is ../layout.py, shared with node
processes; what only the launcher does to a run directory is here.
"""

import fcntl
import os
import stat
from typing import Any, Dict

from acme_launch import errors
from acme_launch import safe_dirs
from acme_launch.layout import (checkpoints_dir, config_path, final_eval_path,
                                logs_dir, nodes_dir, progress_path, read_json,
                                stop_request_path, summary_path)


def create(run_dir: str) -> None:
  """Makes the run directory and its folders, readable by the user only."""
  for path in (run_dir, checkpoints_dir(run_dir), logs_dir(run_dir),
               nodes_dir(run_dir), os.path.join(run_dir, 'metrics')):
    os.makedirs(path, mode=0o700, exist_ok=True)


def clear_live_files(run_dir: str) -> None:
  """Removes the previous launch's progress, summary, final evaluation and
  stop request before a new one."""
  for path in (progress_path(run_dir), summary_path(run_dir),
               final_eval_path(run_dir), stop_request_path(run_dir)):
    if os.path.exists(path):
      os.unlink(path)


# The files a run (or a sweep) writes at its top and reads back, and the
# folder of Launchpad's pickled program (run/core.py): never links.
_OWN_FILES = ('.lock', '.launchpad', 'config.json', 'progress.json',
              'summary.json', 'final_eval.json', 'stop_request.json',
              'tracking.json', 'sweep.json', 'sweep_summary.json',
              '.mlflow-parent.lock')
_RUN_FOLDERS = ('checkpoints', 'logs', 'nodes', 'metrics')


def take(run_dir: str, new: bool = False, what: str = 'run directory',
         folders=_RUN_FOLDERS) -> None:
  """Takes the run directory for this process: made (exclusively if `new`:
  its name was chosen at random) or opened, checked on its descriptor
  (../safe_dirs.py), its `folders` made, its files no links, locked.
  LaunchError if it cannot be used or is in use; then nothing in it was
  changed but missing folders made.

  The checks are on the opened folder; the path, which the rest of the
  run uses, is then checked to name that same folder.
  """
  fd = safe_dirs.open_checked(run_dir, what, create='new' if new else 'any')
  try:
    if not os.access('.', os.W_OK | os.X_OK, dir_fd=fd):
      raise errors.LaunchError(f'{what} {run_dir} is not writable')
    _check_own_files(fd, run_dir)
    for name in folders:
      _make_folder(fd, run_dir, name)
    _lock(fd, run_dir)
    if not safe_dirs.is_same_folder(run_dir, fd):
      unlock(run_dir)
      raise errors.LaunchError(
          f'{what} {run_dir} was replaced while it was opened; refused')
  finally:
    os.close(fd)


def _check_own_files(fd: int, run_dir: str) -> None:
  """LaunchError if a file the run writes, or a node log, is a link."""
  names = list(_OWN_FILES)
  try:
    logs_fd = os.open('logs', os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                      os.O_CLOEXEC, dir_fd=fd)
  except OSError:
    pass  # No logs/ yet (a link there is refused by _make_folder).
  else:
    try:
      names += [os.path.join('logs', n) for n in os.listdir(logs_fd)]
    finally:
      os.close(logs_fd)
  for name in names:
    try:
      st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
      continue
    if stat.S_ISLNK(st.st_mode):
      raise errors.LaunchError(
          f'{os.path.join(run_dir, name)} is a symbolic link; a run '
          'directory\'s files are never opened through links: remove it')


def _make_folder(fd: int, run_dir: str, name: str) -> None:
  """RUN_DIR/name made private if missing; LaunchError if it is not a
  writable folder of this user's."""
  path = os.path.join(run_dir, name)
  try:
    os.mkdir(name, mode=0o700, dir_fd=fd)
  except FileExistsError:
    pass
  except OSError as e:
    raise errors.LaunchError(f'cannot create {path}: {e.strerror}') from None
  st = os.stat(name, dir_fd=fd, follow_symlinks=False)
  if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
    raise errors.LaunchError(
        f'{path} is not a folder of yours (a link, a file or another '
        'user\'s); a run directory\'s folders are its own')
  if not os.access(name, os.W_OK | os.X_OK, dir_fd=fd):
    raise errors.LaunchError(f'run directory {path} is not writable')


# Open lock files by run directory, held until this process exits (the CLI)
# or the run ends (the Python API: unlock).
_held_locks: Dict[str, Any] = {}


def _lock(fd: int, run_dir: str) -> None:
  """An flock on <run_dir>/.lock, opened through the checked folder `fd`
  without following a link; LaunchError if in use.

  The kernel releases it when the launcher exits, however it exits, so a
  stale lock never blocks a resume.
  """
  lock_fd = safe_dirs.open_file(fd, '.lock', os.O_RDWR | os.O_CREAT,
                                os.path.join(run_dir, '.lock'))
  lock_file = os.fdopen(lock_fd, 'r+', errors='replace')
  try:
    fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    holder = ' '.join(lock_file.read(100).split()) or 'another launcher'
    lock_file.close()
    raise errors.LaunchError(
        f'run directory {run_dir} is in use by {holder}; wait for that run '
        'to end or choose another --run_name') from None
  lock_file.truncate(0)
  lock_file.write(f'pid {os.getpid()}\n')
  lock_file.flush()
  _held_locks[run_dir] = lock_file


def in_use(run_dir: str) -> bool:
  """Whether a launcher holds the run directory (its lock, as `take` takes
  it): a launcher that ended, however, holds nothing."""
  try:
    fd = os.open(os.path.join(run_dir, '.lock'),
                 os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except OSError:
    return False  # No lock file (never taken), or a link: not a lock.
  try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
  except OSError:
    return True
  finally:
    os.close(fd)  # Also gives the shared lock back.
  return False


def unlock(run_dir: str) -> None:
  """Gives the run directory back (a run of the Python API has ended)."""
  lock_file = _held_locks.pop(run_dir, None)
  if lock_file is not None:
    lock_file.close()


def unlock_all() -> None:
  for run_dir in list(_held_locks):
    unlock(run_dir)


def check_resumable(run_dir: str, identity: Dict[str, Any]) -> None:
  """Refuses to resume a run whose agent, task or shapes differ."""
  saved = read_json(config_path(run_dir))
  if saved is None:
    return
  saved_identity = saved.get('identity', {})
  for key, value in identity.items():
    if key in saved_identity and saved_identity[key] != value:
      raise errors.LaunchError(
          f'cannot resume {run_dir}: its {key} is {saved_identity[key]!r}, '
          f'this config has {value!r}; use another --run_name')
