"""summary.json and the summary lines: a final evaluation's spread and its
split, from the run directory's final_eval.json."""

import os

from acme_launch import layout
from acme_launch.run import core
from acme_launch.run import summary as summary_lib

# A final evaluation of docs/results/ppo_stagger_before.json (seed 0):
# the cheetah stood still from six of ten starts.
STILL = [4997.3, -18.0, -60.2, 5097.7, -62.9, -6.3, -44.8, 5064.9, 5065.4,
         -100.8]


def _summary(run_dir, returns):
  os.makedirs(run_dir, exist_ok=True)
  if returns is not None:
    layout.write_json_atomic(layout.final_eval_path(run_dir), {
        'actor_steps': 1000000, 'episodes': len(returns),
        'return_mean': sum(returns) / len(returns), 'return_std': 2501.0,
        'returns': returns, 'lengths': [1000] * len(returns)})
  return summary_lib.make_summary(
      run_dir, core.Outcome(0, 'budget_reached', wall_time=100.0), 1000000)


def test_a_split_evaluation_says_so_in_the_json_and_the_lines(tmp_path):
  summary = _summary(str(tmp_path / 'run'), STILL)
  assert summary['final_eval_return_median'] == (-18.0 - 6.3) / 2  # 6 low.
  assert summary['final_eval_return_min'] == -100.8
  assert summary['final_eval_return_max'] == 5097.7
  assert summary['final_eval_split'] == (
      'episodes split into two groups far apart: 6 of 10 -101 to -6, '
      '4 of 10 4,997 to 5,098')
  lines = summary_lib.format_summary(summary).splitlines()
  assert lines[-3].startswith('final eval return  1993.2 +- 2501.0 (10 episodes')
  assert lines[-2] == ('final eval spread  median -12.2, lowest -100.8, '
                       'highest 5097.7')
  assert lines[-1] == ('final eval split   episodes split into two groups '
                       'far apart: 6 of 10 -101 to -6, 4 of 10 4,997 to 5,098')


def test_a_tight_evaluation_has_no_split_line(tmp_path):
  summary = _summary(str(tmp_path / 'run'), [5400.0, 5450.0, 5550.0])
  assert summary['final_eval_split'] is None
  assert summary_lib.format_summary(summary).splitlines()[-1].startswith(
      'final eval spread  median 5450.0')


def test_no_final_evaluation_leaves_the_spread_empty(tmp_path):
  summary = _summary(str(tmp_path / 'run'), None)
  assert summary['final_eval_return_median'] is None
  assert summary['final_eval_split'] is None
  assert 'final eval' not in summary_lib.format_summary(summary)


def _at_budget_run(run_dir, summary=None):
  """A run directory whose launch reached 16,000 actor steps (its counter
  checkpoint says so) and was killed before it wrote summary.json: its last
  progress and evaluation lines came earlier."""
  os.makedirs(os.path.join(run_dir, 'metrics'))
  layout.write_json_atomic(layout.progress_path(run_dir), {
      'time': 1.0, 'counts': {'actor_steps': 15500, 'learner_steps': 240}})
  with open(os.path.join(run_dir, 'metrics', 'evaluator_0.csv'), 'w') as f:
    f.write('actor_steps,episode_return\n8000,4.0\n14230,9.5\n')
  if summary is not None:
    layout.write_json_atomic(layout.summary_path(run_dir), summary)
  return {'actor_steps': 16000.0, 'actor_episodes': 1600.0,
          'learner_steps': 250.0}


def test_a_run_found_at_its_budget_without_a_summary_gets_one_from_its_counter(
    tmp_path):
  run_dir = str(tmp_path / 'run')
  counts = _at_budget_run(run_dir)
  summary = summary_lib.at_budget(run_dir, 16000, counts)
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['exit_code'] == 0
  assert (summary['actor_steps'], summary['learner_steps'],
          summary['actor_episodes']) == (16000, 250, 1600)
  assert summary['restored_actor_steps'] == 16000
  assert summary['wall_time_seconds'] == 0.0
  assert summary['env_steps_per_second'] == 0.0
  assert (summary['last_eval_return'], summary['last_eval_actor_steps']) == (
      9.5, 14230)
  assert summary['final_eval_return_mean'] is None  # None was taken.


def test_a_run_stopped_at_its_budget_is_said_to_have_reached_it(tmp_path):
  run_dir = str(tmp_path / 'run')
  counts = _at_budget_run(run_dir, {'exit_reason': 'terminated',
                                    'actor_steps': 16000})
  summary = summary_lib.at_budget(run_dir, 16000, counts)
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] == 16000


def test_a_run_whose_summary_says_it_reached_the_budget_keeps_that_summary(
    tmp_path):
  run_dir = str(tmp_path / 'run')
  reached = _summary(str(tmp_path / 'reached'), [5400.0, 5450.0])
  reached.update(actor_steps=1000000, max_actor_steps=1000000)
  counts = _at_budget_run(run_dir, reached)
  # Lowering the budget to below what the run has also leaves it as it is.
  for budget in (1000000, 900000):
    assert summary_lib.at_budget(run_dir, budget, counts) == reached


def test_a_summary_of_an_earlier_segment_is_not_the_runs_at_its_budget(
    tmp_path):
  run_dir = str(tmp_path / 'run')
  counts = _at_budget_run(run_dir, {'exit_reason': 'budget_reached',
                                    'actor_steps': 8000,
                                    'max_actor_steps': 8000})
  summary = summary_lib.at_budget(run_dir, 16000, counts)
  assert (summary['actor_steps'], summary['max_actor_steps']) == (16000,
                                                                  16000)
