"""PPO's reward normalization in a real launch: it reaches its budget with the
actors' logged returns in the environment's own units and the learner's
batches scaled (the scaler and both writers: tests/adders/test_reward_scaling.py)."""

import csv
import os

from tests.conftest import read_json, run_launcher


def _rows(path):
  with open(path) as f:
    return list(csv.DictReader(f))


def test_a_launch_learns_from_scaled_rewards_and_logs_unscaled_returns(
    workdir):
  run_dir = os.path.join(workdir, 'scaled')
  result = run_launcher(
      '--config=smoke', '--config.env_name=Hopper-v4',
      '--config.ppo.normalize_rewards=True', '--config.max_actor_steps=4000',
      f'--workdir={workdir}', '--run_name=scaled')
  assert result.returncode == 0, result.stderr[-2000:]
  assert read_json(os.path.join(run_dir, 'summary.json'))['exit_reason'] == (
      'budget_reached')
  # Hopper pays about 1 a step for staying up: the actors' episodes report
  # that; the learner's batches hold it divided by the returns' std, several
  # once a few episodes have run (unscaled, this column reads 0.7-1.4).
  episodes = _rows(os.path.join(run_dir, 'metrics', 'actor_0.csv'))
  per_step = sum(float(r['episode_return']) for r in episodes) / sum(
      float(r['episode_length']) for r in episodes)
  assert 0.5 < per_step < 2.0
  learner = _rows(os.path.join(run_dir, 'metrics', 'learner_0.csv'))
  assert learner
  assert float(learner[-1]['rewards_mean']) < per_step / 3
