"""MLflow: one MLflow run per program, in a file store or on a server.

The default store is <run_dir>/mlruns (`file:` URI); a sweep's points
share <sweep_dir>/mlruns, each point a child of one parent run named after
the sweep. MLflow 3 keeps its
file store in maintenance mode and refuses it unless MLFLOW_ALLOW_FILE_STORE
is set: for a file store the launcher sets it in its own process (and the
docs show it for `mlflow ui`). A server URI (--tracking_uri or
MLFLOW_TRACKING_URI) was probed before launch (tracking/__init__.py); its
credentials stay in memory, masked in tracking.json and in what is printed
(MLflow's own line with the run's URL is left out for such a URI).
Rows go in batches, each metric stepped by the row's actor_steps. Params
are the resolved config, flattened; a resumed run keeps the values it was
started with (MLflow refuses to change a param) and logs only new ones.
"""

import os
import re
import time
from typing import Dict, Iterable, List, Optional

from acme_launch import credentials
from acme_launch import safe_dirs
from acme_launch.tracking import follower

_BATCH = 1000        # MLflow's limit of metrics per log_batch call.
_PARAM_BATCH = 100   # ... and of params.
_PARAM_LENGTH = 6000
_BAD_NAME_CHARS = re.compile(r'[^\w\-. /]')


def default_uri(run_dir: str, group: str = '') -> str:
  """The file store in the run directory; a sweep's points (`group`) share
  one in the sweep directory."""
  home = os.path.dirname(run_dir) if group else run_dir
  return 'file:' + os.path.join(home, 'mlruns')


def _is_file_store(uri: str) -> bool:
  return uri.startswith('file:') or ':' not in uri


def _name(text: str) -> str:
  return _BAD_NAME_CHARS.sub('_', text)


class MlflowBackend:
  name = 'mlflow'

  def __init__(self, uri: str = ''):
    self._uri = uri
    self._run_dir = ''
    self._group = ''
    self._client = None
    self._run_id = ''
    self._experiment_id = ''

  def open(self, run_dir: str, run_name: str, project: str, group: str,
           params: Dict[str, object], saved: Optional[dict]) -> dict:
    self._run_dir, self._group = run_dir, group
    uri = self._uri or default_uri(run_dir, group)
    if _is_file_store(uri) and not uri.startswith('file:'):
      uri = 'file:' + os.path.abspath(uri)  # A plain path.
    self._uri = uri
    if _is_file_store(uri) and not os.environ.get('MLFLOW_ALLOW_FILE_STORE'):
      os.environ['MLFLOW_ALLOW_FILE_STORE'] = 'true'
    if credentials.has_credentials(uri):
      # MLflow prints the run's URL, this URI in it, when a run ends.
      os.environ['MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT'] = 'true'
    from mlflow import tracking
    self._client = tracking.MlflowClient(tracking_uri=uri)
    saved = saved or {}
    if saved.get('run_id'):
      self._run_id = saved['run_id']
      self._experiment_id = saved.get('experiment_id', '')
      self._client.update_run(self._run_id, status='RUNNING')
      existing = set(self._client.get_run(self._run_id).data.params)
    else:
      self._experiment_id = self._experiment(project)
      tags = {'acme_launch.run_dir': run_dir}
      if group:
        tags['acme_launch.group'] = group
        tags['mlflow.parentRunId'] = self._parent_run(group, run_dir)
      run = self._client.create_run(self._experiment_id, run_name=run_name,
                                    tags=tags)
      self._run_id = run.info.run_id
      existing = set()
    self._log_params({k: v for k, v in params.items()
                      if _name(k) not in existing})
    return self.state()

  def _experiment(self, project: str) -> str:
    experiment = self._client.get_experiment_by_name(project)
    if experiment is not None:
      return experiment.experiment_id
    try:
      return self._client.create_experiment(project)
    except Exception:
      # Made meanwhile by another launcher (a sweep's points).
      return self._client.get_experiment_by_name(project).experiment_id

  def _parent_run(self, group: str, run_dir: str) -> str:
    """The sweep's parent run (named after the sweep directory), made by
    the first of its points; the points hold a lock in the sweep directory
    while they look for it, so that they all find the same one."""
    import fcntl
    lock_path = os.path.join(os.path.dirname(run_dir), '.mlflow-parent.lock')
    with os.fdopen(safe_dirs.open_append_nofollow(lock_path), 'a') as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      found = self._client.search_runs(
          [self._experiment_id],
          filter_string=f"tags.`acme_launch.sweep` = '{group}'",
          max_results=1)
      if found:
        return found[0].info.run_id
      parent = self._client.create_run(
          self._experiment_id, run_name=group,
          tags={'acme_launch.sweep': group,
                'acme_launch.run_dir': os.path.dirname(run_dir)})
      self._client.set_terminated(parent.info.run_id)
      return parent.info.run_id

  def _log_params(self, params: Dict[str, object]) -> None:
    from mlflow import entities
    items = [entities.Param(_name(k), str(v)[:_PARAM_LENGTH])
             for k, v in sorted(params.items())]
    for i in range(0, len(items), _PARAM_BATCH):
      self._client.log_batch(self._run_id, params=items[i:i + _PARAM_BATCH])

  def state(self) -> dict:
    """Ids, and the URI ('' for the run directory's own store, so that a
    copied or moved run directory keeps its store with it), its
    credentials masked (a resume asks for them again)."""
    uri = ('' if self._uri == default_uri(self._run_dir, self._group)
           else credentials.mask(self._uri))
    return {'run_id': self._run_id, 'experiment_id': self._experiment_id,
            'tracking_uri': uri}

  def describe(self) -> str:
    return f'mlflow run {self._run_id} ({credentials.mask(self._uri)})'

  def log_rows(self, rows: Iterable[follower.Row]) -> None:
    from mlflow import entities
    now = int(time.time() * 1000)
    metrics = []
    for row in rows:
      stamp = int(row.time * 1000) if row.time is not None else now
      for key, value in row.values.items():
        metrics.append(entities.Metric(_name(f'{row.node}/{key}'), value,
                                       stamp, row.step))
    for i in range(0, len(metrics), _BATCH):
      self._client.log_batch(self._run_id, metrics=metrics[i:i + _BATCH])

  def log_video(self, path: str, name: str, step: int) -> None:
    """An evaluation's mp4 as an artifact under videos/ (its name says
    the node and the actor steps)."""
    del name, step
    self._client.log_artifact(self._run_id, path, artifact_path='videos')

  def log_summary(self, summary: Dict[str, object]) -> None:
    """Numbers as metrics summary/<key>; the rest as tags summary.<key>."""
    from mlflow import entities
    now = int(time.time() * 1000)
    step = int(summary.get('actor_steps') or 0)
    metrics, tags = [], []
    for key, value in sorted(summary.items()):
      if isinstance(value, bool) or value is None:
        continue
      if isinstance(value, (int, float)):
        metrics.append(entities.Metric(_name(f'summary/{key}'), float(value),
                                       now, step))
      elif isinstance(value, str):
        tags.append(entities.RunTag(_name(f'summary.{key}'), value))
    self._client.log_batch(self._run_id, metrics=metrics, tags=tags)

  def log_files(self, paths: List[str], base: str) -> None:
    for path in paths:
      folder = os.path.dirname(os.path.relpath(path, base))
      self._client.log_artifact(self._run_id, path, artifact_path=folder or None)

  def close(self, exit_code: int) -> None:
    if self._client is not None:
      status = ('FINISHED' if exit_code == 0 else
                'KILLED' if exit_code > 128 else 'FAILED')  # 130: Ctrl-C.
      self._client.set_terminated(self._run_id, status=status)
      self._client = None
