"""Bootstrap intervals: repeatable, and exact where the resamples can be
counted by hand."""

import numpy as np
import pytest

from acme_launch.stats import library
from acme_launch.stats import metrics


def test_two_runs_give_their_whole_range():
  # Resampled means of [0, 10]: 0 (1/4), 5 (1/2), 10 (1/4).
  assert library.interval([0, 10], metrics.mean) == (5.0, 0.0, 10.0)


def test_equal_runs_give_a_point():
  assert library.interval([7, 7, 7], metrics.iqm) == (7.0, 7.0, 7.0)


def test_resamples_stay_within_their_task():
  scores = np.array([[0.0, 100.0], [1.0, 101.0], [2.0, 102.0]])
  samples = library.bootstrap_samples(scores, reps=50)
  assert samples.shape == (50, 3, 2)
  assert set(np.unique(samples[..., 0])) <= {0.0, 1.0, 2.0}
  assert set(np.unique(samples[..., 1])) <= {100.0, 101.0, 102.0}


def test_the_same_seed_gives_the_same_interval_and_holds_the_point():
  scores = np.random.default_rng(3).normal(5000, 400, size=12)
  first = library.interval_estimates(scores, reps=2000, seed=1)
  assert first == library.interval_estimates(scores, reps=2000, seed=1)
  for name, estimate in first.items():
    assert estimate['low'] <= estimate['value'] <= estimate['high'], name
  assert first != library.interval_estimates(scores, reps=2000, seed=2)


def test_probability_of_improvement_interval():
  better, worse = [10, 11, 12, 13], [0, 1, 2, 3]
  assert library.probability_of_improvement(better, worse) == (1.0, 1.0, 1.0)
  value, low, high = library.probability_of_improvement(
      [5, 1, 6, 2], [4, 3, 0, 7], reps=2000)
  assert value == pytest.approx(8 / 16)  # 3 + 1 + 3 + 1 pairs above.
  assert 0 <= low < value < high <= 1


def test_performance_profile_band_holds_the_profile():
  scores = np.arange(12.0) * 100
  profile, low, high = library.performance_profile(scores, [0, 550, 2000])
  np.testing.assert_allclose(profile, [11 / 12, 0.5, 0.0])
  assert np.all(low <= profile) and np.all(profile <= high)
  assert low[2] == high[2] == 0.0


def test_one_run_gets_point_estimates_and_no_interval():
  estimates = library.interval_estimates([4000.0])
  assert estimates['iqm'] == {'value': 4000.0, 'low': None, 'high': None}
  assert library.estimate_text(estimates['mean']) == '4,000.0'
  assert library.estimate_text({'value': 5051.5, 'low': 4861.0,
                                'high': 5234.175}, ',.0f') == (
      '5,052 [4,861, 5,234]')
  assert library.estimates_text(library.interval_estimates([7.0, 7.0])) == (
      'IQM 7.0 [7.0, 7.0]; median 7.0 [7.0, 7.0]; mean 7.0 [7.0, 7.0]')
