"""Weights & Biases: one W&B run per program, offline or online.

W&B decides its mode itself (WANDB_MODE, `wandb login`): offline runs land
in <run_dir>/wandb/offline-run-*/ and go up later with `wandb sync`. Each
CSV row is one `log` call at the next W&B step, kept in tracking.json, so a
resumed launcher continues the same run id after the last step it sent
(an offline run resumed is a second offline-run folder with the same id and
only the later steps: `wandb sync --id ID --append` joins it, see
docs/tracking.md). Each node's metrics are plotted
against `actor_steps` (define_metric), whichever node logged last.
"""

import os
import sys
from typing import Dict, Iterable, List, Optional

from acme_launch import credentials
from acme_launch.tracking import follower


class WandbBackend:
  name = 'wandb'

  def __init__(self):
    self._run = None
    self._step = 0
    self._prefixes = set()

  def open(self, run_dir: str, run_name: str, project: str, group: str,
           params: Dict[str, object], saved: Optional[dict]) -> dict:
    import wandb
    saved = saved or {}
    settings = wandb.Settings(console='off', save_code=False,
                              disable_git=True, x_disable_stats=True,
                              x_save_requirements=False)
    # W&B records this process's command line with the run (its metadata,
    # in the run's files): there too, a --tracking_uri's credentials masked.
    argv, sys.argv = sys.argv, credentials.mask_all(sys.argv)
    try:
      self._run = wandb.init(
          project=project, name=run_name, group=group or None,
          id=saved.get('run_id') or None, resume='allow', dir=run_dir,
          config=params, settings=settings)
    finally:
      sys.argv = argv
    if saved.get('run_id'):
      self._run.config.update(params, allow_val_change=True)
    self._step = int(saved.get('step', 0))
    self._run.define_metric(follower.STEP_KEY)
    return self.state()

  def state(self) -> dict:
    return {'run_id': self._run.id, 'step': self._step,
            'mode': 'offline' if self._run.offline else 'online'}

  def describe(self) -> str:
    run = self._run
    if run.offline:
      return (f'wandb offline run {run.id} (in {os.path.dirname(run.dir)}; '
              'upload with `wandb sync`)')
    return f'wandb run {run.id} ({run.url})'

  def log_rows(self, rows: Iterable[follower.Row]) -> None:
    for row in rows:
      if row.node not in self._prefixes:
        self._prefixes.add(row.node)
        self._run.define_metric(f'{row.node}/*',
                                step_metric=follower.STEP_KEY)
      data = {f'{row.node}/{key}': value for key, value in row.values.items()}
      data[follower.STEP_KEY] = row.step
      self._run.log(data, step=self._step)
      self._step += 1

  def log_video(self, path: str, name: str, step: int) -> None:
    """An evaluation's mp4 as a `wandb.Video` (W&B copies the file),
    keyed video/<name> at the next W&B step, beside its actor steps."""
    import wandb
    self._run.log({f'video/{name}': wandb.Video(path, format='mp4'),
                   follower.STEP_KEY: step}, step=self._step)
    self._step += 1

  def log_summary(self, summary: Dict[str, object]) -> None:
    self._run.summary.update(
        {k: v for k, v in summary.items() if v is not None})

  def log_files(self, paths: List[str], base: str) -> None:
    for path in paths:
      self._run.save(path, base_path=base, policy='now')

  def close(self, exit_code: int) -> None:
    """Ends the run and waits until W&B has written (or sent) all of it:
    `finish` returns before its service has (an offline run's file was
    seen holding only its header), and W&B's own wait at exit never runs
    where the launcher ends with os._exit (local_mt, test_mt)."""
    if self._run is not None:
      import wandb
      self._run.finish(exit_code=exit_code)
      self._run = None
      wandb.teardown(exit_code=exit_code)
