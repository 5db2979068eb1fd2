"""Experiment trackers beside the run directory: `--tracking=wandb,mlflow`.

The nodes write what they always write (metrics/<node>.csv and
TensorBoard); a tracker in the launcher process follows those files and
sends each new row to the chosen backends, under one tracking run per
program, then the summary and plots at the end (run.py). The run directory
stays the one source of truth, so a backend that is slow or down never
holds up a node, and --resume continues the same tracking run from the
offsets kept in tracking.json.

This module is light: it names the backends and checks the choice before
launch (check_choice); wandb and mlflow are imported only when chosen.

A tracking URI's credentials (credentials.py) are never written: the
launcher holds the URI in memory, tracking.json keeps it masked, and a
resumed run asks for it again, by flag or environment (resumed_uri).
"""

import dataclasses
import importlib
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional, Sequence, Tuple

from acme_launch import credentials
from acme_launch import errors

# Always written by the nodes; named in --tracking for completeness.
ALWAYS = ('tensorboard', 'csv')
# Sent by the launcher's tracker; the package each needs (an optional extra).
BACKEND_PACKAGES = {'wandb': 'wandb', 'mlflow': 'mlflow'}
DEFAULT_PROJECT = 'acme-launch'
PROBE_TIMEOUT_SECONDS = 3.0


@dataclasses.dataclass(frozen=True)
class Choice:
  """The tracking backends of a launch, checked (see check_choice)."""
  backends: Tuple[str, ...] = ()     # 'wandb', 'mlflow': beyond TB and CSV.
  project: str = DEFAULT_PROJECT     # W&B project, MLflow experiment.
  mlflow_uri: str = ''               # '': <run_dir>/mlruns (a file store).

  def __bool__(self) -> bool:
    return bool(self.backends)


def parse_backends(names: Sequence[str]) -> Tuple[str, ...]:
  """The backends named by --tracking beyond the ones always written, in
  the order given (a comma-separated string too, as the Python API may
  pass it); LaunchError for an unknown name."""
  if isinstance(names, str):
    names = names.split(',')
  chosen = []
  for name in names:
    name = name.strip().lower()
    if not name or name in ALWAYS:
      continue
    if name not in BACKEND_PACKAGES:
      raise errors.LaunchError(
          f'--tracking: unknown backend {name!r}; choose from '
          f'{", ".join(ALWAYS[:1] + tuple(BACKEND_PACKAGES))} (comma-separated)')
    if name not in chosen:
      chosen.append(name)
  return tuple(chosen)


def check_choice(names: Sequence[str], uri: str, project: str,
                 saved: Optional[dict] = None,
                 environ: Optional[dict] = None) -> Choice:
  """--tracking, --tracking_uri and --tracking_project checked before launch.

  `saved` is the run directory's tracking.json when resuming: without
  --tracking the run goes on with the backends (and MLflow URI) it had.
  Each chosen backend's package must import, and an MLflow tracking server
  must answer within PROBE_TIMEOUT_SECONDS. Raises LaunchError (one line).
  """
  environ = os.environ if environ is None else environ
  saved = saved or {}
  if isinstance(names, str):
    names = [n for n in names.split(',') if n.strip()]
  backends = parse_backends(names)
  if not names:
    backends = tuple(b for b in saved.get('backends', ())
                     if b in BACKEND_PACKAGES)
  project = project or saved.get('project') or DEFAULT_PROJECT
  if uri and 'mlflow' not in backends:
    raise errors.LaunchError(
        '--tracking_uri is MLflow\'s tracking URI: it goes with '
        '--tracking=mlflow')
  for name in backends:
    _check_installed(name)
  mlflow_uri = ''
  if 'mlflow' in backends:
    if 'mlflow' in saved:  # Resuming: the store that holds its run.
      mlflow_uri = resumed_uri(uri, environ.get('MLFLOW_TRACKING_URI', ''),
                               saved['mlflow'].get('tracking_uri', ''))
    else:
      mlflow_uri = uri or environ.get('MLFLOW_TRACKING_URI', '')
    if mlflow_uri:
      probe_mlflow(mlflow_uri)
  return Choice(backends, project, mlflow_uri)


def resumed_uri(flag: str, environ_uri: str, saved: str,
                what: str = 'run') -> str:
  """The MLflow URI a resumed run (or sweep) tracks to: `flag`
  (--tracking_uri) when given; else `saved`, the URI its first launch
  recorded, unless that was masked (credentials.py): then MLFLOW_TRACKING_URI
  (`environ_uri`) when it masks to the same, as the first launch may have
  had it. LaunchError (one line) when the credentials are not given again.
  """
  if flag or not credentials.is_masked(saved):
    return flag or saved
  if environ_uri and credentials.mask(environ_uri) == saved:
    return environ_uri
  other = (f' (MLFLOW_TRACKING_URI is {credentials.mask(environ_uri)})'
           if environ_uri else '')
  raise errors.LaunchError(
      f'this {what} tracks to MLflow at {saved}, whose credentials are never '
      'saved: give the URI again, as its first launch got it, with '
      f'--tracking_uri or MLFLOW_TRACKING_URI{other}')


def _check_installed(name: str) -> None:
  package = BACKEND_PACKAGES[name]
  try:
    importlib.import_module(package)
  except ImportError as e:
    raise errors.LaunchError(
        f'--tracking={name}: the {package} package is not installed here '
        f'({" ".join(str(e).split())[:120]}); install it with '
        f'`pip install -e ".[{name}]"` (versions pinned in requirements.txt)'
    ) from None


def probe_mlflow(uri: str) -> None:
  """An http(s) tracking URI must answer (any HTTP status will do) within
  PROBE_TIMEOUT_SECONDS; other URIs (file:, a path, sqlite:, databricks)
  are left to MLflow. The probe sends no credentials; messages show the
  URI masked."""
  parsed = urllib.parse.urlparse(uri)
  if parsed.scheme not in ('http', 'https'):
    return
  shown = credentials.mask(uri)
  if not parsed.hostname:
    raise errors.LaunchError(f'--tracking_uri={shown}: no host in that URI')
  address = credentials.without_credentials(uri)
  try:
    with urllib.request.urlopen(address.rstrip('/') + '/health',
                                timeout=PROBE_TIMEOUT_SECONDS):
      pass
  except urllib.error.HTTPError:
    return  # A server answered.
  except (urllib.error.URLError, socket.timeout, OSError) as e:
    reason = getattr(e, 'reason', e)
    raise errors.LaunchError(
        f'MLflow tracking server {shown} does not answer ({reason}); start it, '
        'fix --tracking_uri (or MLFLOW_TRACKING_URI), or leave it out for a '
        'file store in the run directory') from None


def state_path(run_dir: str) -> str:
  """tracking.json: the tracking runs' ids and the rows already sent."""
  return os.path.join(run_dir, 'tracking.json')


def read_state(run_dir: str) -> dict:
  """tracking.json's content; {} when there is none (or it is unreadable:
  the runs then start afresh)."""
  try:
    with open(state_path(run_dir)) as f:
      state = json.load(f)
  except (OSError, ValueError):
    return {}
  return state if isinstance(state, dict) else {}
