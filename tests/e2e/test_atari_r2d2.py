"""End-to-end: `r2d2_atari` (Acme's R2D2 on EnvPool's Pong) under local_mp
to a tiny budget, and its bad input refused before anything starts."""

import os


from tests.conftest import reached_budget, read_json, run_launcher
from tests.e2e.conftest import dry_run_stdout


BUDGET = 300
EPISODE_STEPS = 100  # Pong games cut short: the evaluations take seconds.
# The smallest program R2D2 runs: one actor, a 100-sequence replay, 7-step
# sequences (2 burn-in + 4 trained + 1), batches of 2 and a network of one
# 4-channel convolution, an LSTM of 8 and a duelling head of 8.
TINY = (
    '--config.num_actors=1', f'--config.max_actor_steps={BUDGET}',
    '--config.eval_every_steps=150', '--config.final_eval_episodes=1',
    f'--config.env_max_episode_steps={EPISODE_STEPS}',
    '--config.log_every_seconds=1',
    '--config.r2d2.min_replay_size=10', '--config.r2d2.max_replay_size=100',
    '--config.r2d2.batch_size=2', '--config.r2d2.burn_in_length=2',
    '--config.r2d2.trace_length=4', '--config.r2d2.sequence_period=2',
    '--config.r2d2.bootstrap_n=2', '--config.r2d2.target_update_period=10',
    '--config.r2d2.variable_update_period=10',
    '--config.r2d2.num_parallel_calls=1',
    '--config.network.conv_channels=(4,)', '--config.network.conv_kernels=(8,)',
    '--config.network.conv_strides=(8,)', '--config.network.lstm_size=8',
    '--config.network.head_hidden_layers=(8,)')


def _one_error_line(result) -> str:
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines()
           if l.startswith('acme-launch: error:')]
  assert len(lines) == 1, result.stderr
  return lines[0]


def test_r2d2_atari_trains_to_a_tiny_budget_and_evaluates(workdir):
  result = run_launcher('--config=r2d2_atari', f'--workdir={workdir}',
                        '--run_name=tiny', *TINY, timeout=240)
  run_dir = os.path.join(workdir, 'tiny')
  summary = reached_budget(result, run_dir, BUDGET)
  # The final evaluation: one whole (time-limited) game with the parameters
  # at the budget, played by R2D2's own recurrent actor.
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == summary['final_eval_episodes'] == 1
  assert final['actor_steps'] >= BUDGET
  assert final['lengths'] == [EPISODE_STEPS]
  # Pong's real score: points are +-1 each; a game cut at 100 steps loses a
  # few at most.
  assert -21 <= final['returns'][0] <= 21
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert 'atari:Pong' in str(config)


def test_an_unknown_game_is_one_line_exit_2_before_anything_starts(workdir):
  result = run_launcher('--config=r2d2_atari', f'--workdir={workdir}',
                        '--config.env_name=atari:NotAGame', timeout=120)
  line = _one_error_line(result)
  assert "'atari:NotAGame': unknown atari game" in line
  assert 'atari:Pong' in line and 'atari:Breakout' in line
  assert os.listdir(workdir) == []  # No run directory: nothing started.


def test_r2d2_dry_run_shows_the_replay_memory_estimate(cli_module, workdir):
  # 20k sequences (about 4.4 GB) rather than the config's 50k (about 11
  # GB), so that a smaller test machine runs it too. In process; the
  # launcher's own --dry_run: the last test of this file.
  lines = dry_run_stdout(cli_module, '--config=r2d2_atari',
                          f'--workdir={workdir}',
                          '--config.r2d2.max_replay_size=20000').splitlines()
  (first,) = [l for l in lines if l.startswith('replay/0 memory: about ')]
  assert first.endswith(' GB')  # "... of this host's memory N GB"
  assert "when full, of this host's memory" in first
  table = lines[lines.index(first) + 1]
  # 20,000 sequences a period of 20 apart: 400k Pong steps.
  assert "table 'priority_table': 20,000 items x 20 new steps" in table
  # Replay checkpoints are on by default: room for them, and how to drop it.
  room = lines[lines.index(first) + 2]
  assert room.startswith('  + room for its checkpoints, about ')
  assert room.endswith('--config.checkpoint.replay=false drops it)')
  assert '--config.r2d2.max_replay_size' in lines[lines.index(first) + 3]
  assert os.listdir(workdir) == []


def test_a_replay_larger_than_the_host_is_one_line_exit_2(workdir):
  result = run_launcher('--config=r2d2_atari', f'--workdir={workdir}',
                        '--config.r2d2.max_replay_size=10000000', '--dry_run',
                        timeout=120)
  line = _one_error_line(result)
  assert 'the replay node would need about ' in line
  assert "more than this host's memory" in line
  assert '10,000,000 items x 20 new steps' in line
  assert 'lower --config.r2d2.max_replay_size' in line
  assert os.listdir(workdir) == []
