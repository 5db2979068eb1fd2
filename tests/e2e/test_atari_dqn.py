"""End-to-end: `dqn_atari` (Ape-X-style DQN on Pong: batched actors, a
fixed epsilon per environment) under local_mp to a tiny budget, on EnvPool
and on the gym backend (Gymnasium + ale-py)."""

import os


from tests.conftest import reached_budget, read_json, run_launcher


BUDGET = 400
EPISODE_STEPS = 100  # Pong games cut short: the evaluations take seconds.
# Two actors of two games each (four epsilons), a 500-transition replay,
# batches of 4 and a network of one 4-channel convolution and 8 units.
TINY = (
    '--config.num_actors=2', '--config.envs_per_actor=2',
    f'--config.max_actor_steps={BUDGET}', '--config.eval_every_steps=200',
    '--config.final_eval_episodes=1',
    f'--config.env_max_episode_steps={EPISODE_STEPS}',
    '--config.log_every_seconds=1',
    '--config.dqn.min_replay_size=20', '--config.dqn.max_replay_size=500',
    '--config.dqn.batch_size=4', '--config.dqn.samples_per_insert=1.0',
    '--config.dqn.target_update_period=10', '--config.dqn.prefetch_size=1',
    '--config.network.conv_channels=(4,)', '--config.network.conv_kernels=(8,)',
    '--config.network.conv_strides=(8,)', '--config.network.hidden_layers=(8,)')


def test_dqn_atari_trains_to_a_tiny_budget_and_evaluates(workdir):
  result = run_launcher('--config=dqn_atari', f'--workdir={workdir}',
                        '--run_name=tiny', *TINY, timeout=240)
  run_dir = os.path.join(workdir, 'tiny')
  reached_budget(result, run_dir, BUDGET)
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == 1 and final['lengths'] == [EPISODE_STEPS]
  assert -21 <= final['returns'][0] <= 21  # Pong's real score.
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert config['config']['dqn']['apex_epsilons'] is True


def test_dqn_atari_on_the_gym_backend_trains_to_a_tiny_budget(workdir):
  result = run_launcher('--config=dqn_atari', f'--workdir={workdir}',
                        '--run_name=tiny', '--config.env_backend=gym', *TINY,
                        timeout=240)
  run_dir = os.path.join(workdir, 'tiny')
  reached_budget(result, run_dir, BUDGET)
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == 1 and final['lengths'] == [EPISODE_STEPS]
  assert -21 <= final['returns'][0] <= 21  # Pong's real score.
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert config['config']['env_backend'] == 'gym'


def test_an_unknown_game_on_the_gym_backend_is_one_line_exit_2(workdir):
  result = run_launcher('--config=dqn_atari', f'--workdir={workdir}',
                        '--config.env_backend=gym',
                        '--config.env_name=atari:NotAGame', timeout=120)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines()
           if l.startswith('acme-launch: error:')]
  assert len(lines) == 1, result.stderr
  assert "'atari:NotAGame': unknown atari game; ale-py has" in lines[0]
  assert 'atari:Pong' in lines[0]
  assert os.listdir(workdir) == []


def test_ape_x_epsilons_with_envpool_async_mode_are_one_line_exit_2(workdir):
  result = run_launcher('--config=dqn_atari', f'--workdir={workdir}',
                        '--config.envpool_async_envs=16', timeout=120)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines()
           if l.startswith('acme-launch: error:')]
  assert len(lines) == 1 and 'config.envpool_async_envs=0' in lines[0], (
      result.stderr)
  assert os.listdir(workdir) == []
