"""The objects that run inside node processes, besides Acme's own.

Each is built by program/build.py inside its node's process (Launchpad calls the
node's constructor there) and talks to other nodes only through the handles
it was given. Results go to the run directory, never back to the launcher.
"""

import csv
import os
import time
from typing import Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme import environment_loop
from acme.utils import counting
from acme.utils import loggers
from acme.utils import signals
import launchpad as lp
import numpy as np
import tensorflow as tf

from acme_launch.envs import video
from acme_launch.program import evaluation as evaluation_lib
from acme_launch import durable
from acme_launch import layout
from acme_launch import safe_dirs
from acme_launch.plan import topology


class MetricsLogger(loggers.Logger):
  """A node's metrics: rows in metrics/<node>.csv and TensorBoard scalars.

  Unlike Acme's CSVLogger it names the file after the node, so a reader finds
  `metrics/actor_0.csv` rather than a uid-suffixed folder. The CSV keeps the
  columns of its first row. TensorBoard events go to
  metrics/tensorboard/<node>/, stepped by `steps_key` when a row has it.
  """

  def __init__(self, run_dir: str, node: str, time_delta: float = 0.0,
               steps_key: str = 'actor_steps'):
    run_dir = layout.on_this_host(run_dir)
    self._path = layout.metrics_path(run_dir, node)
    self._time_delta = time_delta
    self._steps_key = steps_key
    self._last_write = -float('inf')
    self._rows = 0
    self._file = os.fdopen(safe_dirs.open_append_nofollow(self._path), 'a',
                           newline='')  # Never through a link.
    self._writer = None
    self._summary_writer = tf.summary.create_file_writer(
        os.path.join(layout.tensorboard_dir(run_dir), topology.file_stem(node)))

  def write(self, data: loggers.LoggingData, force: bool = False) -> None:
    """Writes a row, unless one was written under `time_delta` ago.

    `force` writes it regardless: a row that must not be lost, such as the
    totals at the step budget.
    """
    now = time.time()
    if not force and now - self._last_write < self._time_delta:
      return
    self._last_write = now
    row = {k: _scalar(v) for k, v in loggers.to_numpy(data).items()}
    row['wall_time'] = now
    if self._writer is None:
      self._writer = csv.DictWriter(self._file, fieldnames=sorted(row),
                                    extrasaction='ignore')
      if self._file.tell() == 0:
        self._writer.writeheader()
      elif not _ends_a_line(self._path):  # A row cut by a kill: left alone.
        self._file.write('\r\n')
    self._writer.writerow(row)
    self._file.flush()
    self._rows += 1
    step = int(row.get(self._steps_key, self._rows))
    with self._summary_writer.as_default():
      for key, value in row.items():
        if isinstance(value, (int, float)) and key != 'wall_time':
          tf.summary.scalar(key, value, step=step)
    self._summary_writer.flush()

  def write_animation(self, tag: str, gif: bytes, height: int, width: int,
                      step: int) -> None:
    """An animated GIF as TensorBoard's image summary (its Images tab
    plays it), as a raw Summary proto: tf.summary.image takes still
    frames only."""
    image = tf.compat.v1.Summary.Image(height=height, width=width,
                                       colorspace=3, encoded_image_string=gif)
    summary = tf.compat.v1.Summary(
        value=[tf.compat.v1.Summary.Value(tag=tag, image=image)])
    with self._summary_writer.as_default():
      tf.summary.experimental.write_raw_pb(summary.SerializeToString(), step)
    self._summary_writer.flush()

  def close(self) -> None:
    self._file.close()
    self._summary_writer.close()


def _ends_a_line(path: str) -> bool:
  """Whether the file's last byte ends a line (never through a link)."""
  fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  try:
    size = os.fstat(fd).st_size
    return size == 0 or os.pread(fd, 1, size - 1) == b'\n'
  finally:
    os.close(fd)


def _scalar(value):
  value = np.asarray(value)
  return value.item() if value.size == 1 else value.tolist()


class BudgetedEnvironmentLoop(environment_loop.EnvironmentLoop):
  """Acme's loop for one environment, stopping at the program's step budget.

  Acme's own runs until the program stops, so actors go on stepping while
  the counter notices the budget, the final evaluation plays and the nodes
  shut down. This one stops stepping after the episode that takes the
  counter's actor steps to the budget, then waits for the program to stop.
  """

  def __init__(self, *args, max_actor_steps: int, **kwargs):
    super().__init__(*args, **kwargs)
    self._max_actor_steps = max_actor_steps

  def run(self) -> None:  # pytype: disable=signature-mismatch
    stop = lp.stop_event()
    with signals.runtime_terminator():
      while not stop.is_set():
        result = self.run_episode()
        self._logger.write(result)
        if result.get('actor_steps', 0) >= self._max_actor_steps:
          stop.wait()
          return


class StepsLimiter:
  """Stops the program when the actors' step budget is reached.

  Runs in the counter node's process (program/checkpointing.CounterNode
  calls `poll` four times a second), reading the counts there without a
  call across processes. Also leaves the counts in the run directory:
  progress.json (latest totals, rewritten) for the launcher's progress
  display and summary, and a row of metrics/progress.csv for plots. Nothing
  flows back from the launcher into the program.
  """

  def __init__(self, max_actor_steps: int, run_dir: str,
               stop_at_budget: bool = True):
    self._max_actor_steps = max_actor_steps
    self._run_dir = layout.on_this_host(run_dir)
    # False when an evaluator plays the final evaluation and then stops the
    # program: the counter keeps writing progress until then.
    self._stop_at_budget = stop_at_budget
    self._history = MetricsLogger(self._run_dir, 'progress', time_delta=1.0)
    self._budget_row_written = False
    self._stopped = False

  def poll(self, counts: dict) -> None:
    """Writes `counts`, the counter's totals; stops the program at the budget."""
    budget_reached = write_progress(self._run_dir, counts,
                                    self._max_actor_steps)
    # The totals at the budget always get their row: plots and rates end
    # at the budget, not up to a second before it.
    self._history.write({key: counts.get(key, 0) for key in _PROGRESS_KEYS},
                        force=budget_reached and not self._budget_row_written)
    self._budget_row_written = self._budget_row_written or budget_reached
    if budget_reached and self._stop_at_budget and not self._stopped:
      self._stopped = True
      lp.stop()


class PollingStepsLimiter:
  """The steps limiter as a node of its own, polling a counter node.

  For programs that acme-launch does not build (stock Acme's, in
  bench/throughput.py), whose counter cannot host the limiter.
  """

  def __init__(self, counter: counting.Counter, max_actor_steps: int,
               run_dir: str):
    self._counter = counter
    self._limiter = StepsLimiter(max_actor_steps, run_dir)

  def run(self) -> None:
    stop = lp.stop_event()
    while not stop.wait(_POLL_SECONDS):
      self._limiter.poll(self._counter.get_counts())


def write_progress(run_dir: str, counts: dict, max_actor_steps: int) -> bool:
  """Rewrites progress.json with the counter's `counts`; True at the budget.

  The counter's limiter writes it as it polls, and the evaluator once more
  before it stops the program after the final evaluation: the launcher
  reads `budget_reached` when the program stops, and the limiter's last poll
  may predate the budget. The counts only grow, so a later write by either
  never takes `budget_reached` back.
  """
  budget_reached = counts.get('actor_steps', 0) >= max_actor_steps
  durable.write_json(
      layout.progress_path(run_dir),
      {'time': time.time(), 'counts': counts,
       'budget_reached': budget_reached})
  return budget_reached


_POLL_SECONDS = 0.25  # Budget overshoot is at most this much stepping (plus
                      # the episode Acme's loop counts at its end).
_PROGRESS_KEYS = ('actor_steps', 'actor_episodes', 'learner_steps',
                  'evaluator_episodes')


class ScheduledEvaluator(core.Worker):
  """Plays evaluation episodes every `eval_every_steps` actor steps.

  Stock Acme's evaluator plays without pause and takes CPU from the actors;
  this one waits for the actors between evaluations. An evaluation happens at
  step 0 too, so every run records at least one. Each plays the episodes of
  `evaluation` (program/evaluation.py). Given a `final_evaluation`, once the
  actors reach `max_actor_steps` it plays that, writes final_eval.json and
  stops the program (the counter's steps limiter leaves the stop to it).
  With `video_every` K, the first episode of every K-th evaluation (the
  first included) and of the final one is filmed into videos/ (as
  `video_name`-STEPS.mp4, final-STEPS.mp4) and its frames, downscaled, go
  to TensorBoard as an animation.
  """

  def __init__(self, evaluation, counter: counting.Counter,
               logger: loggers.Logger, eval_every_steps: int,
               max_actor_steps: int = 0, run_dir: str = '',
               final_evaluation: Optional[evaluation_lib.Evaluation] = None,
               video_every: int = 0, video_name: str = 'evaluator_0'):
    self._video_every = video_every
    self._video_name = video_name
    self._evaluations = 0
    self._max_actor_steps = max_actor_steps
    self._run_dir = layout.on_this_host(run_dir)
    self._final_evaluation = final_evaluation
    self._evaluation = evaluation
    self._parent_counter = counter
    self._counter = counting.Counter(counter, 'evaluator')
    self._logger = logger
    self._eval_every_steps = eval_every_steps

  def run(self) -> None:
    stop = lp.stop_event()
    next_eval_at = 0
    # On stop, end even in the middle of an episode.
    with signals.runtime_terminator():
      while not stop.is_set():
        actor_steps = self._parent_counter.get_counts().get('actor_steps', 0)
        if self._final_evaluation and actor_steps >= self._max_actor_steps:
          self._evaluate_final(actor_steps)
          write_progress(self._run_dir, self._parent_counter.get_counts(),
                         self._max_actor_steps)
          lp.stop()
          return
        if actor_steps < next_eval_at:
          stop.wait(_POLL_SECONDS)
          continue
        self._evaluate(actor_steps)
        next_eval_at = ((actor_steps // self._eval_every_steps + 1) *
                        self._eval_every_steps)

  def _film_to(self, name: str, actor_steps: int, now: bool) -> str:
    if not (self._video_every and now):
      return ''
    return os.path.join(layout.videos_dir(self._run_dir),
                        f'{name}-{actor_steps}.mp4')

  def _hand_off(self, result: dict, tag: str, actor_steps: int) -> None:
    """A filmed episode's frames to TensorBoard (the mp4 is in videos/,
    where the launcher's trackers find it)."""
    clip = result.get('clip')
    if not clip or not hasattr(self._logger, 'write_animation'):
      return
    height, width = clip.thumbnails[0].shape[:2]
    self._logger.write_animation(
        tag, video.gif(clip.thumbnails, clip.thumbnail_fps), height, width,
        actor_steps)

  def _evaluate_final(self, actor_steps: int) -> None:
    started = time.time()
    result = self._final_evaluation.run(
        film_to=self._film_to('final', actor_steps, True))
    seconds = round(time.time() - started, 2)
    self._hand_off(result, 'video/final', actor_steps)
    returns = np.asarray(result['returns'])
    layout.write_json_atomic(layout.final_eval_path(self._run_dir), {
        'actor_steps': int(actor_steps),
        'episodes': len(returns),
        'return_mean': float(returns.mean()),
        'return_std': float(returns.std()),
        'returns': result['returns'],
        'lengths': result['lengths'],
        'seconds': seconds,
    })

  def _evaluate(self, actor_steps: int) -> None:
    result = self._evaluation.run(film_to=self._film_to(
        self._video_name, actor_steps,
        self._evaluations % max(self._video_every, 1) == 0))
    self._evaluations += 1
    self._hand_off(result, 'video/evaluation', actor_steps)
    returns, lengths = result['returns'], result['lengths']
    counts = self._counter.increment(episodes=len(returns),
                                     steps=int(np.sum(lengths)))
    self._logger.write({
        'actor_steps': actor_steps,
        'episode_return': float(np.mean(returns)),
        'episode_return_min': float(np.min(returns)),
        'episode_return_max': float(np.max(returns)),
        'episode_length': float(np.mean(lengths)),
        'evaluator_episodes': counts['evaluator_episodes'],
    })
