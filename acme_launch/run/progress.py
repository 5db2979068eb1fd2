"""The launcher's view of a running program, read from the run directory.

The counter's steps limiter rewrites progress.json four times a second and evaluators append
to metrics/evaluator_*.csv; this module turns those into a live progress bar
(rich) on a terminal, or a plain line every `every_seconds` otherwise (logs,
CI, `| tee`).
"""

import collections
import sys
import time
from typing import Deque, Optional, Tuple

from rich import progress as rich_progress

from acme_launch import layout
from acme_launch.run import summary as summary_lib

_RATE_WINDOW_SECONDS = 60.0
_MIN_RATE_POINTS = 3


class RateEstimator:
  """Env steps/s over the last minute, steady however coarse the counter is.

  Actors report steps in quanta (Acme's loop at each episode end: 1,000
  steps every ~14 s on a 70 steps/s SAC run), so a rate taken over a plain
  time window jumps between 0 and twice the truth. This one keeps only the
  points where the count changed, over the last `window_seconds` (and at
  least the last `min_points` of them, so slow runs still have a rate), and
  divides steps by the time between the first and last change. When no
  change comes for longer than the usual gap between changes (a stalled
  run), the time since the last change counts too, so the rate decays
  smoothly instead of holding its old value.
  """

  def __init__(self, window_seconds: float = _RATE_WINDOW_SECONDS,
               min_points: int = _MIN_RATE_POINTS):
    self._window_seconds = window_seconds
    self._min_points = min_points
    self._points: Deque[Tuple[float, int]] = collections.deque()

  def add(self, now: float, steps: int) -> None:
    if self._points and steps == self._points[-1][1]:
      return
    if self._points and steps < self._points[-1][1]:
      self._points.clear()  # A new count (another run in the directory).
    self._points.append((now, steps))
    while (len(self._points) > self._min_points and
           now - self._points[0][0] > self._window_seconds):
      self._points.popleft()

  def rate(self, now: float) -> float:
    """Steps per second; 0 until the count has changed twice."""
    if len(self._points) < 2:
      return 0.0
    (t0, s0), (t1, s1) = self._points[0], self._points[-1]
    usual_gap = (t1 - t0) / (len(self._points) - 1)
    elapsed = max(t1 - t0, now - t0 - usual_gap)
    return (s1 - s0) / elapsed if elapsed > 0 else 0.0


class ProgressReporter:
  """Reports actor steps against the budget, steps/s, learner steps, ETA."""

  def __init__(self, run_dir: str, max_actor_steps: int,
               interactive: Optional[bool] = None, every_seconds: float = 10.0):
    self._run_dir = run_dir
    self._max_actor_steps = max_actor_steps
    self._interactive = sys.stdout.isatty() if interactive is None else interactive
    self._every_seconds = every_seconds
    self._last_line = 0.0
    self._rate_estimator = RateEstimator()
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
    progress = layout.read_json(layout.progress_path(self._run_dir))
    if progress is None:
      return
    counts = progress.get('counts', {})
    actor_steps = int(counts.get('actor_steps', 0))
    now = time.time()
    # The limiter's own timestamp: when the counter had this value.
    self._rate_estimator.add(float(progress.get('time', now)), actor_steps)
    rate = self._rate_estimator.rate(now)
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
