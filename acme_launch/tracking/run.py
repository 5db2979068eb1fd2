"""The launcher's tracker: the run directory's metrics to W&B and MLflow.

Opened by driver.py once config.json is written, polled from the
supervisor's loop (every POLL_SECONDS at most), finished after
summary.json: rows from metrics/*.csv as they grow, the evaluator's
videos (videos/*.mp4, config.eval_video_every) once each is complete, then
the summary and the plots. tracking.json keeps each backend's run id and how far each CSV
was sent, rewritten after every poll that sent rows, so --resume reopens
the same tracking runs and sends only what they lack. A backend that
fails is reported once and dropped; the run itself goes on.
"""

import os
import re
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

from acme_launch import credentials
from acme_launch import durable
from acme_launch import layout
from acme_launch import tracking
from acme_launch.tracking import follower as follower_lib

POLL_SECONDS = 5.0
_VIDEO_NAME = re.compile(r'([A-Za-z0-9_]+)-(\d+)\.mp4')


def _backend(name: str, choice: tracking.Choice):
  if name == 'wandb':
    from acme_launch.tracking import wandb_backend
    return wandb_backend.WandbBackend()
  from acme_launch.tracking import mlflow_backend
  return mlflow_backend.MlflowBackend(choice.mlflow_uri)


def flatten(tree: Dict[str, object], prefix: str = '') -> Dict[str, object]:
  """{'ppo': {'learning_rate': 3e-4}} -> {'ppo.learning_rate': 3e-4}."""
  flat = {}
  for key, value in tree.items():
    name = f'{prefix}{key}'
    if isinstance(value, dict):
      flat.update(flatten(value, name + '.'))
    else:
      flat[name] = value if isinstance(value, (int, float, str, bool)) else str(value)
  return flat


def _warn(message: str) -> None:
  """One line on stderr, any URI credentials in it (a backend's error
  naming its server) masked."""
  print(f'acme-launch: warning: {credentials.mask(message)}', file=sys.stderr,
        flush=True)


class Tracker:
  """Follows one run directory into the chosen backends."""

  def __init__(self, run_dir: str, choice: tracking.Choice, run_name: str,
               params: Dict[str, object], group: str = '',
               clock: Callable[[], float] = time.monotonic):
    self._clock = clock
    self._run_dir = run_dir
    self._choice = choice
    saved = tracking.read_state(run_dir)
    # What the file held is kept (a tracker left out of this launch keeps
    # its run id for a later one).
    self._state = {**saved, 'backends': list(choice.backends),
                   'project': choice.project, 'group': group}
    self._follower = follower_lib.MetricsFollower(
        layout.metrics_dir(run_dir), saved.get('files'))
    self._backends = []
    for name in choice.backends:
      backend = _backend(name, choice)
      try:
        self._state[name] = backend.open(run_dir, run_name, choice.project,
                                         group, params, saved.get(name))
      except Exception as e:
        _warn(f'--tracking={name}: cannot open its run, so nothing goes '
              f'there ({type(e).__name__}: {" ".join(str(e).split())[:300]})')
        continue
      self._backends.append(backend)
    self._last_poll = -float('inf')
    self._save()

  def describe(self) -> List[str]:
    return [backend.describe() for backend in self._backends]

  def _save(self) -> None:
    self._state['files'] = self._follower.state()
    for backend in self._backends:
      self._state[backend.name] = backend.state()
    durable.write_json(tracking.state_path(self._run_dir), self._state)

  def _each(self, what: str, call) -> None:
    for backend in list(self._backends):
      try:
        call(backend)
      except Exception as e:
        _warn(f'--tracking={backend.name}: {what} failed, so nothing more '
              f'goes there ({type(e).__name__}: '
              f'{" ".join(str(e).split())[:300]})')
        self._backends.remove(backend)

  def update(self) -> None:
    """Sends new rows, at most every POLL_SECONDS (the supervisor calls it
    twice a second)."""
    if self._clock() - self._last_poll >= POLL_SECONDS:
      self.poll()

  def poll(self) -> int:
    """Sends every new complete row (and video) now; returns how many rows."""
    self._last_poll = self._clock()
    rows = self._follower.new_rows()
    if rows:
      self._each('sending rows', lambda b: b.log_rows(rows))
    videos = self._new_videos()
    for path, name, step in videos:
      self._each('sending a video',
                 lambda b, video=(path, name, step): b.log_video(*video))
      self._state.setdefault('videos', []).append(os.path.basename(path))
    if rows or videos:
      self._save()
    return len(rows)

  def _new_videos(self) -> List[Tuple[str, str, int]]:
    """(path, name, actor steps) of each video not sent yet, in step
    order: the evaluator writes <name>-<steps>.mp4 under a hidden name
    and renames it when complete."""
    folder = layout.videos_dir(self._run_dir)
    sent = set(self._state.get('videos', ()))
    found = []
    for file_name in os.listdir(folder) if os.path.isdir(folder) else ():
      match = _VIDEO_NAME.fullmatch(file_name)
      if match and file_name not in sent:
        found.append((os.path.join(folder, file_name), match.group(1),
                      int(match.group(2))))
    return sorted(found, key=lambda video: (video[2], video[1]))

  def finish(self, summary: Optional[dict], exit_code: int,
             files: List[str] = ()) -> None:
    """The last rows, the summary, `files` (plots, summary.json) as the
    runs' files, then each run ends."""
    self.poll()
    if summary is not None:
      self._each('the summary', lambda b: b.log_summary(summary))
    if files:
      self._each('the plots', lambda b: b.log_files(list(files),
                                                    self._run_dir))
    self._save()
    self._each('closing its run', lambda b: b.close(exit_code))
    self._backends = []
