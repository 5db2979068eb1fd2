"""Run directory layout: one folder per run, chosen by the launcher.

    <workdir>/<run_name>/
      config.json     resolved config, resource plan, node seeds, versions
      checkpoints/    learner/, counter/ (TF checkpointer), replay/ (Reverb)
      logs/           one file per node process: <label>_<index>.log
      metrics/        one CSV per node: actor_0.csv, evaluator_0.csv, ...
      nodes/          what each node process received (env, devices)
      progress.json   counter totals, rewritten every second while running
      summary.json    final figures, written by the launcher at exit
"""

import json
import os
import tempfile
from typing import Any


def checkpoints_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'checkpoints')


def logs_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'logs')


def nodes_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'nodes')


def metrics_path(run_dir: str, node: str) -> str:
  return os.path.join(run_dir, 'metrics', node.replace('/', '_') + '.csv')


def log_path(run_dir: str, node: str) -> str:
  return os.path.join(logs_dir(run_dir), node.replace('/', '_') + '.log')


def progress_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'progress.json')


def summary_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'summary.json')


def config_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'config.json')


def create(run_dir: str) -> None:
  """Makes the run directory and its folders, readable by the user only."""
  for path in (run_dir, checkpoints_dir(run_dir), logs_dir(run_dir),
               nodes_dir(run_dir), os.path.join(run_dir, 'metrics')):
    os.makedirs(path, mode=0o700, exist_ok=True)


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
