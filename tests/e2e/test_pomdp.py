"""End-to-end: `r2d2_pomdp` (R2D2 on CartPole without its velocities: an
LSTM over vector observations) under local_mp to a tiny budget with a final
evaluation."""

import os


from tests.conftest import reached_budget, read_json, run_launcher


BUDGET = 400
TINY = (
    '--config.eval_every_steps=300', '--config.eval_episodes=1',
    '--config.final_eval_episodes=2', '--config.log_every_seconds=1',
    '--config.r2d2.batch_size=2', '--config.r2d2.min_replay_size=10',
    '--config.r2d2.max_replay_size=100', '--config.r2d2.burn_in_length=2',
    '--config.r2d2.trace_length=4', '--config.r2d2.sequence_period=2',
    '--config.r2d2.variable_update_period=10',
    '--config.r2d2.samples_per_insert=1.0',
    '--config.network.lstm_size=8', '--config.network.head_hidden_layers=(8,)')


def test_r2d2_pomdp_trains_to_a_tiny_budget_and_evaluates(workdir):
  result = run_launcher('--config=r2d2_pomdp', f'--workdir={workdir}',
                        '--run_name=tiny', *TINY,
                        f'--config.max_actor_steps={BUDGET}', timeout=300)
  run_dir = os.path.join(workdir, 'tiny')
  summary = reached_budget(result, run_dir, BUDGET)
  assert summary['learner_steps'] > 0
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['identity']['observation_shapes'] == [[2]]
  # Two games of CartPole (the pole falls, or 500 steps), each scoring a
  # point a step.
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == 2 and final['actor_steps'] >= BUDGET
  assert all(1 <= n <= 500 for n in final['lengths'])
  assert final['returns'] == [float(n) for n in final['lengths']]
