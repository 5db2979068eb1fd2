"""The launcher's view of a running program, read from the run directory.

The steps limiter rewrites progress.json every second and evaluators append
to metrics/evaluator_*.csv; this module turns those into a live progress bar
(rich) on a terminal, or a plain line every `every_seconds` otherwise (logs,
CI, `| tee`).
"""

import collections
import sys
import time
from typing import Deque, Optional, Tuple

from rich import progress as rich_progress

from acme_launch import rundir
from acme_launch import summary as summary_lib

_RATE_WINDOW_SECONDS = 20.0


class ProgressReporter:
  """Reports actor steps against the budget, steps/s, learner steps, ETA."""

  def __init__(self, run_dir: str, max_actor_steps: int,
               interactive: Optional[bool] = None, every_seconds: float = 10.0):
    self._run_dir = run_dir
    self._max_actor_steps = max_actor_steps
    self._interactive = sys.stdout.isatty() if interactive is None else interactive
    self._every_seconds = every_seconds
    self._last_line = 0.0
    self._samples: Deque[Tuple[float, int]] = collections.deque()
    self._bar: Optional[rich_progress.Progress] = None
    self._task = None

  def __enter__(self) -> 'ProgressReporter':
    if self._interactive:
      self._bar = rich_progress.Progress(
          rich_progress.TextColumn('actor steps'),
          rich_progress.BarColumn(),
          rich_progress.MofNCompleteColumn(),
          rich_progress.TextColumn('{task.fields[stats]}'),
          transient=False)
      self._task = self._bar.add_task('train', total=self._max_actor_steps,
                                      stats='starting nodes...')
      self._bar.start()
    return self

  def __exit__(self, *exc) -> None:
    if self._bar is not None:
      self._bar.stop()

  def update(self) -> None:
    """Reads the run directory and redraws (or prints a line when due)."""
    progress = rundir.read_json(rundir.progress_path(self._run_dir))
    if progress is None:
      return
    counts = progress.get('counts', {})
    actor_steps = int(counts.get('actor_steps', 0))
    now = time.time()
    self._samples.append((now, actor_steps))
    while self._samples and now - self._samples[0][0] > _RATE_WINDOW_SECONDS:
      self._samples.popleft()
    rate = self._rate()
    remaining = max(self._max_actor_steps - actor_steps, 0)
    eta = f'{remaining / rate:,.0f}s' if rate > 0 else '?'
    evaluations = summary_lib.evaluation_rows(self._run_dir)
    eval_return = (f'{evaluations[-1]["episode_return"]:.1f}'
                   if evaluations else '-')
    stats = (f'{rate:,.0f} env steps/s | learner steps '
             f'{int(counts.get("learner_steps", 0)):,} | eval return '
             f'{eval_return} | ETA {eta}')
    if self._bar is not None:
      self._bar.update(self._task, completed=min(actor_steps, self._max_actor_steps),
                       stats=stats)
    elif now - self._last_line >= self._every_seconds:
      self._last_line = now
      percent = 100.0 * actor_steps / self._max_actor_steps
      print(f'progress: actor steps {actor_steps:,}/{self._max_actor_steps:,} '
            f'({percent:.0f}%) | {stats}', flush=True)

  def _rate(self) -> float:
    if len(self._samples) < 2:
      return 0.0
    (t0, s0), (t1, s1) = self._samples[0], self._samples[-1]
    return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0
