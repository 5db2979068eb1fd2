"""The point estimates on cases small enough to check by hand."""

import numpy as np
import pytest

from acme_launch.stats import metrics


def test_iqm_is_the_mean_of_the_middle_half():
  # 8 runs: the lowest two and highest two are cut, (3+4+5+6)/4.
  assert metrics.iqm([100, 1, 2, 3, 4, 5, 6, -100]) == pytest.approx(3.5)
  # 10 runs: int(10 / 4) = 2 cut from each end, as scipy's trim_mean.
  assert metrics.iqm(np.arange(10.0)) == pytest.approx(4.5)


def test_iqm_median_and_mean_pool_runs_and_tasks():
  scores = np.array([[0.0, 10.0], [2.0, 20.0], [4.0, 30.0], [6.0, 40.0]])
  assert metrics.mean(scores) == pytest.approx((3 + 25) / 2)
  assert metrics.median(scores) == pytest.approx(8.0)  # (6 + 10) / 2
  assert metrics.iqm(scores) == pytest.approx(np.mean([4, 6, 10, 20]))


def test_batches_on_leading_axes_are_kept():
  batch = np.stack([np.arange(4.0)[:, None], 10 + np.arange(4.0)[:, None]])
  np.testing.assert_allclose(metrics.mean(batch), [1.5, 11.5])
  np.testing.assert_allclose(metrics.iqm(batch), [1.5, 11.5])


def test_probability_of_improvement_counts_pairs_and_ties_half():
  # Pairs (x, y): 3 > 1, 3 > 2, 1 == 1, 1 < 2: (2 + 0.5) / 4.
  assert metrics.probability_of_improvement([3, 1], [1, 2]) == pytest.approx(0.625)
  assert metrics.probability_of_improvement([5, 6], [1, 2]) == 1.0
  assert metrics.probability_of_improvement([1, 2], [1, 2]) == 0.5


def test_score_distribution_is_the_fraction_above_each_threshold():
  np.testing.assert_allclose(
      metrics.score_distribution([1, 2, 3, 4], [0, 2, 4]), [1.0, 0.5, 0.0])


@pytest.mark.parametrize('bad', [[], [[]], 3.0])
def test_no_runs_is_a_value_error(bad):
  with pytest.raises(ValueError):
    metrics.iqm(bad)
