"""The launcher's side of the run directory: create it, take it, check it.

The layout itself (paths, atomic JSON) is ../layout.py, shared with node
processes; what only the launcher does to a run directory is here.
"""

import fcntl
import os
from typing import Any, Dict

from acme_launch import errors
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


def prepare(run_dir: str) -> None:
  """Creates the run directory; LaunchError if it cannot be used."""
  if os.path.exists(run_dir) and not os.path.isdir(run_dir):
    raise errors.LaunchError(f'run directory {run_dir} exists and is not a directory')
  try:
    create(run_dir)
  except OSError as e:
    raise errors.LaunchError(
        f'cannot create run directory {run_dir}: {e.strerror}') from e
  for path in (run_dir, checkpoints_dir(run_dir), logs_dir(run_dir)):
    if not os.access(path, os.W_OK | os.X_OK):
      raise errors.LaunchError(f'run directory {path} is not writable')


# Open lock files by run directory, held until this process exits (the CLI)
# or the run ends (the Python API: unlock).
_held_locks: Dict[str, Any] = {}


def lock(run_dir: str) -> None:
  """Takes the run directory for this process; LaunchError if in use.

  An flock on <run_dir>/.lock: the kernel releases it when the launcher
  exits, however it exits, so a stale lock never blocks a resume.
  """
  path = os.path.join(run_dir, '.lock')
  lock_file = open(path, 'a+')
  try:
    fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    lock_file.seek(0)
    holder = lock_file.read().strip() or 'another launcher'
    lock_file.close()
    raise errors.LaunchError(
        f'run directory {run_dir} is in use by {holder}; wait for that run '
        'to end or choose another --run_name') from None
  lock_file.truncate(0)
  lock_file.write(f'pid {os.getpid()}\n')
  lock_file.flush()
  _held_locks[run_dir] = lock_file


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
