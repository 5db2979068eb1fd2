"""Point estimates of a score matrix (runs x tasks), as rliable defines them.

Every function takes scores shaped (..., runs, tasks): leading axes are
batches (the bootstrap's repetitions) and are kept. A 1-D array is one
task's runs. Scores are returns here; rliable normalizes them per task first,
which a caller with several tasks should do too.
"""

from typing import Sequence

import numpy as np


def as_matrix(scores) -> np.ndarray:
  """`scores` as a float array (..., runs, tasks); a 1-D array is one task."""
  scores = np.asarray(scores, dtype=float)
  if scores.ndim == 1:
    scores = scores[:, None]
  if scores.ndim < 2 or scores.shape[-2] == 0 or scores.shape[-1] == 0:
    raise ValueError(f'scores must hold runs x tasks, got shape {scores.shape}')
  return scores


def _flat(scores) -> np.ndarray:
  scores = as_matrix(scores)
  return scores.reshape(*scores.shape[:-2], -1)


def iqm(scores) -> np.ndarray:
  """Interquartile mean over all runs and tasks: the mean of the middle
  half, `scipy.stats.trim_mean(x, 0.25)` (int(n / 4) cut from each end).
  Less moved by one odd run than the mean, less wasteful than the median."""
  flat = np.sort(_flat(scores), axis=-1)
  cut = int(0.25 * flat.shape[-1])
  return flat[..., cut:flat.shape[-1] - cut].mean(axis=-1)


def median(scores) -> np.ndarray:
  """The median over all runs and tasks. (rliable's `aggregate_median` is the
  median of the per-task means: for one task it equals the mean, so this
  one, which shows a run group's middle, is kept instead.)"""
  return np.median(_flat(scores), axis=-1)


def mean(scores) -> np.ndarray:
  """The mean over tasks of each task's mean over runs (rliable's)."""
  return as_matrix(scores).mean(axis=-2).mean(axis=-1)


def probability_of_improvement(scores_x, scores_y) -> np.ndarray:
  """P(X > Y): the chance that a run of X scores above a run of Y on the same
  task, ties counting half (the Mann-Whitney U statistic over runs_x x
  runs_y), averaged over tasks: rliable's `probability_of_improvement`."""
  x, y = as_matrix(scores_x), as_matrix(scores_y)
  if x.shape[-1] != y.shape[-1]:
    raise ValueError(f'X has {x.shape[-1]} tasks, Y {y.shape[-1]}')
  xs, ys = x[..., :, None, :], y[..., None, :, :]
  per_task = ((xs > ys).mean(axis=(-3, -2)) +
              0.5 * (xs == ys).mean(axis=(-3, -2)))
  return per_task.mean(axis=-1)


def score_distribution(scores, thresholds: Sequence[float]) -> np.ndarray:
  """The performance profile: for each threshold, the fraction of runs
  (over all tasks) that score above it. Shape (..., len(thresholds))."""
  flat = _flat(scores)
  taus = np.asarray(thresholds, dtype=float)
  return (flat[..., None, :] > taus[:, None]).mean(axis=-1)


# The estimators the interval tables report, by name, in their order.
AGGREGATES = {'iqm': iqm, 'median': median, 'mean': mean}
