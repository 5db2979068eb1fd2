"""--sweep_scheduler=asha: Ray Tune's ASHA stops a point that cannot learn
(learning rate 0) at its first rung, on a task any learner improves on at
once (tests/bandit_env.py), and says at which step and why."""

import os

from tests import bandit_env
from tests.conftest import read_json, run_launcher



def test_asha_stops_the_point_that_cannot_learn_at_its_rung_and_says_why(
    workdir):
  sweep_dir = os.path.join(workdir, 'asha')
  # One at a time, in the grid's order: the learner reaches the rung first
  # (its return about 10 there), then the one that cannot learn (about 0).
  result = run_launcher(
      *bandit_env.SWEEP_FLAGS, '--max_concurrent=1',
      # One rung (2,000 <= 8,000 / 4), far enough from the budget that the
      # stopped point cannot reach it while its launcher stops.
      '--sweep_scheduler=asha', '--asha_grace_steps=2000',
      '--asha_reduction=4', '--config.max_actor_steps=8000',
      f'--workdir={workdir}', '--run_name=asha', timeout=420)
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
  assert 'ASHA early stopping (rungs at 2,000 actor steps' in result.stdout
  learner, frozen = 'ppo.learning_rate=0.003', 'ppo.learning_rate=0.0'

  record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  assert record['scheduler']['rungs'] == [2000]
  # The learner ran to its budget, its final evaluation included.
  summary = read_json(os.path.join(sweep_dir, learner, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['final_eval_return_mean'] > 5.0
  assert not os.path.exists(os.path.join(sweep_dir, learner,
                                         'stopped_early.json'))
  # The frozen one was stopped at the rung, before its budget, its program
  # stopped as Ctrl-C stops a run (checkpoints saved).
  stopped = read_json(os.path.join(sweep_dir, frozen, 'stopped_early.json'))
  assert stopped['by'] == 'asha' and stopped['rung_steps'] == 2000
  assert 2000 <= stopped['actor_steps'] < 8000
  assert stopped['eval_return'] < 1.0 < stopped['cutoff']
  assert 'below' in stopped['why']
  frozen_summary = read_json(os.path.join(sweep_dir, frozen, 'summary.json'))
  assert frozen_summary['exit_reason'] == 'terminated'
  assert frozen_summary['actor_steps'] < 8000
  assert os.path.isfile(os.path.join(sweep_dir, frozen, 'checkpoints',
                                     'learner', 'checkpoint'))
  # The table and the terminal say so; a stopped point is not a failure.
  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  rows = {r['point']: r for r in table['points']}
  assert rows[frozen]['exit_reason'] == 'stopped_early'
  assert rows[frozen]['stopped_early']['rung_steps'] == 2000
  assert rows[learner]['exit_reason'] == 'budget_reached'
  assert table['failed'] == []
  assert f'{frozen} stopped early: at the rung of 2,000 actor steps' in (
      result.stdout)

  # Resumed: nothing to run, the stopped point counts as finished.
  again = run_launcher(f'--resume={sweep_dir}')
  assert again.returncode == 0, again.stderr
  assert '0 to run' in again.stdout
