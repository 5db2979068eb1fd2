"""The estimators against rliable 1.2.0's own (requirements-dev.txt) on
fixed arrays: point estimates equal; intervals equal to the Monte Carlo
error (its draws come from arch's generator, ours from numpy's).

The arrays are real: the final returns of `ppo_mujoco` on HalfCheetah-v4
in docs/results/ppo_stagger_after.json and ppo_stagger_after2.json (12 runs)
and ppo_stagger_before.json (6 runs), and a made-up 3-task matrix."""

import numpy as np
import pytest

from acme_launch.stats import library
from acme_launch.stats import metrics

AFTER = np.array([5446, 5575, 5192, 5053, 4997, 5057,
                  4978, 4052, 4711, 5292, 5032, 4724], float)[:, None]
BEFORE = np.array([1993, 4848, 4878, 5733, 4339, 5129], float)[:, None]
TASKS = np.random.default_rng(7).normal([[1.0, 0.5, 0.2]], 0.3, size=(10, 3))
REPS = 2000
# Of the scores' range: Monte Carlo error at 2,000 repetitions is under one
# hundredth; a wrong resampling (not within tasks, not with replacement)
# moves the endpoints by tenths.
TOLERANCE = 0.03
# P(AFTER > BEFORE) over 12 x 6 runs takes values in steps of 1/72, and the
# 2.5th and 97.5th percentiles of 2,000 resamples move by up to 3 of those
# steps from seed to seed in either library (20/72 to 23/72 for the low
# end, seeds 0-29 of each): the two agree to 1/24 and can be told no finer,
# so both are seeded and compared to that. Without resampling the interval
# would shrink to the point estimate, 0.625.
RESOLUTION = 1 / 24


def _seeded():
  """rliable's generator, seeded: its draws (arch's) repeat, as ours do."""
  return np.random.RandomState(library.SEED)


def _rliable_intervals(scores, aggregate):
  from rliable import library as rly
  estimate, interval = rly.get_interval_estimates(
      {'x': scores}, lambda s: np.array([aggregate(s)]), reps=REPS,
      random_state=_seeded())
  return float(estimate['x'][0]), interval['x'][:, 0]


@pytest.mark.parametrize('scores', [AFTER, BEFORE, TASKS],
                         ids=['after', 'before', 'three_tasks'])
@pytest.mark.parametrize('name', ['iqm', 'mean'])
def test_iqm_and_mean_with_intervals_match_rliable(scores, name):
  from rliable import metrics as rly_metrics
  aggregate = {'iqm': rly_metrics.aggregate_iqm,
               'mean': rly_metrics.aggregate_mean}[name]
  value, (low, high) = _rliable_intervals(scores, aggregate)
  ours = library.interval(scores, metrics.AGGREGATES[name], reps=REPS)
  scale = np.ptp(scores)
  assert ours[0] == pytest.approx(value)
  assert abs(ours[1] - low) < TOLERANCE * scale
  assert abs(ours[2] - high) < TOLERANCE * scale


def test_median_of_one_task_is_the_runs_median_not_rliables_mean_of_means():
  from rliable import metrics as rly_metrics
  # rliable's aggregate_median: the median of per-task means.
  assert rly_metrics.aggregate_median(TASKS) == pytest.approx(
      np.median(TASKS.mean(axis=0)))
  assert metrics.median(AFTER) == pytest.approx(np.median(AFTER))


def test_probability_of_improvement_matches_rliable():
  from rliable import library as rly
  from rliable import metrics as rly_metrics
  estimate, interval = rly.get_interval_estimates(
      {'after,before': (AFTER, BEFORE)},
      lambda x, y: np.array([rly_metrics.probability_of_improvement(x, y)]),
      reps=REPS, random_state=_seeded())
  value, low, high = library.probability_of_improvement(
      AFTER, BEFORE, reps=REPS, seed=library.SEED)
  assert value == pytest.approx(float(estimate['after,before'][0]))
  assert value * 72 == pytest.approx(45)  # On the estimator's steps.
  theirs_low, theirs_high = interval['after,before'][:, 0]
  assert abs(low - theirs_low) <= RESOLUTION + 1e-9
  assert abs(high - theirs_high) <= RESOLUTION + 1e-9
  assert high - low > 0.5  # Resampled: far from the point estimate.
  assert metrics.probability_of_improvement(TASKS, TASKS[::-1]) == (
      pytest.approx(rly_metrics.probability_of_improvement(TASKS, TASKS[::-1])))


def test_performance_profile_matches_rliable():
  from rliable import library as rly
  thresholds = np.linspace(4000, 6000, 21)
  profiles, _ = rly.create_performance_profile({'after': AFTER}, thresholds,
                                               reps=REPS)
  # Its bands, seeded: create_performance_profile takes no generator, and
  # this is the call it makes.
  _, bands = rly.get_interval_estimates(
      {'after': AFTER}, lambda s: rly.score_distributions(s, thresholds),
      reps=REPS, random_state=_seeded())
  profile, low, high = library.performance_profile(AFTER, thresholds,
                                                   reps=REPS)
  np.testing.assert_allclose(profile, profiles['after'])
  np.testing.assert_allclose(low, bands['after'][0], atol=TOLERANCE * 3)
  np.testing.assert_allclose(high, bands['after'][1], atol=TOLERANCE * 3)
