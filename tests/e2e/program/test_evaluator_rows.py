"""Every evaluation during a run is a row of its evaluator's metrics, however
often node rows are written (`log_every_seconds` throttles the actors' and
the learner's rows, not evaluations, which come every `eval_every_steps`):
a population's score at a boundary is its first evaluation there
(sweep/trials.py), and a curve misses none."""

import os

from acme_launch.run import summary as summary_lib
from tests.conftest import reached_budget, run_launcher

EVERY, BUDGET = 500, 3000


def test_each_evaluation_is_a_row_with_a_long_log_interval(workdir):
  run_dir = os.path.join(workdir, 'rows')
  result = run_launcher(
      '--config=smoke', '--config.env_name=tests.bandit_env:PushBandit-v0',
      '--config.env_max_episode_steps=10', '--config.eval_episodes=2',
      f'--config.eval_every_steps={EVERY}', '--config.log_every_seconds=600',
      f'--config.max_actor_steps={BUDGET}', f'--workdir={workdir}',
      '--run_name=rows')
  reached_budget(result, run_dir, BUDGET)
  rows = summary_lib.evaluation_rows(run_dir)
  # One evaluation at 0, then one at the first count past each multiple
  # of EVERY after the last: never two within EVERY, each one a row.
  assert rows[0]['actor_steps'] == 0
  assert len(rows) >= 3, rows
  assert [r['evaluator_episodes'] for r in rows] == [
      2 * (i + 1) for i in range(len(rows))]
  for before, after in zip(rows, rows[1:]):
    assert after['actor_steps'] >= (before['actor_steps'] // EVERY + 1) * EVERY
