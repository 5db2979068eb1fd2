"""Run directory layout: one folder per run, chosen by the launcher.

    <workdir>/<run_name>/
      config.json     resolved config, resource plan, node seeds, versions
      checkpoints/    learner/, counter/ (TF checkpointer), replay/ (Reverb)
      logs/           one file per node process: <label>_<index>.log
      metrics/        one CSV per node: actor_0.csv, evaluator_0.csv, ...,
                      progress.csv (counter totals each second), and
                      tensorboard/<node>/ event files
      nodes/          what each node process received (env, devices)
      progress.json   counter totals, rewritten four times a second while running
      summary.json    final figures, written by the launcher at exit
"""

import fcntl
import json
import os
import tempfile
from typing import Any, Dict

from acme_launch import errors
from acme_launch.plan import node_env
from acme_launch.plan import topology


def checkpoints_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'checkpoints')


def logs_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'logs')


def nodes_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'nodes')


def metrics_path(run_dir: str, node: str) -> str:
  return os.path.join(run_dir, 'metrics', topology.file_stem(node) + '.csv')


def tensorboard_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'metrics', 'tensorboard')


def log_path(run_dir: str, node: str) -> str:
  return os.path.join(logs_dir(run_dir), topology.file_stem(node) + '.log')


def progress_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'progress.json')


def summary_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'summary.json')


def config_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'config.json')


def stop_request_path(run_dir: str) -> str:
  """Where lp.stop() in a node of a Ray run asks the launcher to stop."""
  return os.path.join(run_dir, 'stop_request.json')


def on_this_host(path: str) -> str:
  """Where this process writes `path`, a path in the launcher's run directory.

  Node objects are built with the launcher's run directory; on a Ray host
  without it they write into the node's mirror, same layout. Everywhere
  else this is `path` itself.
  """
  # Set only for a node of a Ray run on a host that does not share the run
  # directory: the launcher's run directory, which that node's run_dir
  # mirrors there (run/ray/files.py ships the mirror back).
  settings = node_env.NodeEnv.from_environ()
  launcher_dir = settings.mirror_of
  if not launcher_dir:
    return path
  relative = os.path.relpath(path, launcher_dir)
  if relative == '..' or relative.startswith('../'):
    return path
  return os.path.normpath(
      os.path.join(settings.run_dir, relative))


def create(run_dir: str) -> None:
  """Makes the run directory and its folders, readable by the user only."""
  for path in (run_dir, checkpoints_dir(run_dir), logs_dir(run_dir),
               nodes_dir(run_dir), os.path.join(run_dir, 'metrics')):
    os.makedirs(path, mode=0o700, exist_ok=True)


def final_eval_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'final_eval.json')


def clear_live_files(run_dir: str) -> None:
  """Removes the previous launch's progress, summary, final evaluation and
  stop request before a new one."""
  for path in (progress_path(run_dir), summary_path(run_dir),
               final_eval_path(run_dir), stop_request_path(run_dir)):
    if os.path.exists(path):
      os.unlink(path)


def write_json_atomic(path: str, data: Any) -> None:
  """Writes JSON through a temp file and rename: readers never see half."""
  directory = os.path.dirname(path)
  fd, tmp_path = tempfile.mkstemp(dir=directory, prefix='.tmp-')
  try:
    with os.fdopen(fd, 'w') as f:
      json.dump(data, f, indent=2, sort_keys=True, default=str)
    os.replace(tmp_path, path)
  except BaseException:
    if os.path.exists(tmp_path):
      os.unlink(tmp_path)
    raise


def read_json(path: str, default: Any = None) -> Any:
  try:
    with open(path) as f:
      return json.load(f)
  except (FileNotFoundError, json.JSONDecodeError):
    return default


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
