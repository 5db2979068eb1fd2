"""Early stopping's settings, checked before anything starts (the runs:
tests/e2e/sweep/test_early_stopping.py)."""

import pytest

from acme_launch import errors
from acme_launch.sweep import schedulers


def test_rungs_are_the_grace_steps_times_powers_of_the_reduction_up_to_the_budget_over_it():
  settings = schedulers.asha_settings(1_000_000, 10_000, 111_111, 3)
  assert settings['rungs'] == [111_111, 333_333]  # Up to the budget / 3.
  assert settings['reduction'] == 3 and settings['max_steps'] == 1_000_000
  # Defaults: reduction 3, the first rung at the budget / 9.
  assert schedulers.asha_settings(900_000, 10_000, 0, 0)['rungs'] == [
      100_000, 300_000]
  # The last rung leaves the points it keeps a reduction's worth to train.
  assert schedulers.asha_settings(4_000, 1_000, 2_000, 2)['rungs'] == [2_000]
  assert schedulers.asha_settings(10_000, 1_000, 1_000, 2)['rungs'] == [
      1_000, 2_000, 4_000]


@pytest.mark.parametrize('grace, expected', [
    (2_001, 'the first rung must be at most the budget / 2 (2,000 actor steps)'),
    (500, 'comes before the first evaluation (eval_every_steps=1,000)')])
def test_a_rung_past_the_budget_or_before_the_first_evaluation_is_refused(
    grace, expected):
  with pytest.raises(errors.LaunchError, match=r'--asha_grace_steps=\d+: ') as e:
    schedulers.asha_settings(4_000, 1_000, grace, 2)
  assert expected in str(e.value)


def test_tunes_asha_judges_at_the_same_rungs():
  for args in [(1_000_000, 10_000, 111_111, 3), (10_000, 1_000, 1_000, 2),
               (4_000, 1_000, 2_000, 2), (900_000, 0, 0, 0)]:
    settings = schedulers.asha_settings(*args)
    scheduler = schedulers.make(settings, '/nonexistent')
    milestones = sorted(m for m, _ in scheduler._brackets[0]._rungs)
    assert milestones == settings['rungs'], args
  assert schedulers.make(None, '/nonexistent') is None
