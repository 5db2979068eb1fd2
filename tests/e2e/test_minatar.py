"""End-to-end: `r2d2_minatar` (Acme's R2D2 on MinAtar Breakout) planned,
run under local_mp to a tiny budget with a final evaluation (its learner on
two devices), and resumed on one with four games per actor;
`dqn_minatar`'s network planned; a bad game refused before anything
starts (an unknown game: tests/e2e/test_cli.py)."""

import os


from tests.conftest import reached_budget, read_json, run_launcher
from tests.e2e.agents import test_devices as devices


BUDGET, RESUMED_BUDGET = 400, 800
EPISODE_STEPS = 100  # Games cut short: evaluations take a second.
# One actor, a 100-sequence replay, 7-step sequences (2 burn-in + 4 trained
# + 1), batches of 2, and the config's torso shape (3x3, stride 1) at 4
# channels, an LSTM of 8 and a duelling head of 8.
TINY = (
    '--config.num_actors=1',
    '--config.eval_every_steps=300', '--config.eval_episodes=1',
    '--config.final_eval_episodes=2',
    f'--config.env_max_episode_steps={EPISODE_STEPS}',
    '--config.log_every_seconds=1',
    '--config.r2d2.min_replay_size=10', '--config.r2d2.max_replay_size=100',
    '--config.r2d2.batch_size=2', '--config.r2d2.burn_in_length=2',
    '--config.r2d2.trace_length=4', '--config.r2d2.sequence_period=2',
    '--config.r2d2.bootstrap_n=2', '--config.r2d2.target_update_period=10',
    '--config.r2d2.variable_update_period=10',
    # A tight rate limiter: the actor waits for the learner's first steps.
    '--config.r2d2.samples_per_insert=1.0',
    '--config.network.conv_channels=(4,)', '--config.network.lstm_size=8',
    '--config.network.head_hidden_layers=(8,)')


def test_r2d2_minatar_plans_its_grid_network():
  result = run_launcher('--config=r2d2_minatar', '--dry_run')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'r2d2 on minatar:breakout' in result.stdout
  assert 'observations: uint8 (10, 10, 4) in [0, 1]' in result.stdout
  assert 'actions: int32 (), 3 values' in result.stdout
  assert 'actor/1' in result.stdout and 'actor/2' not in result.stdout


def test_r2d2_minatar_trains_on_two_devices_evaluates_and_resumes_on_one_with_four_games_per_actor(
    workdir):
  """One program read for three promises: the tiny run (one game per
  actor: R2D2's own recurrent actor) to the budget with its final
  evaluation, its learner on two devices (tests/e2e/agents/test_devices.py);
  resumed from that checkpoint on one device with four games per actor
  (the batched recurrent actor, one LSTM state each) to a larger budget."""
  result = run_launcher('--config=r2d2_minatar', f'--workdir={workdir}',
                        '--run_name=tiny', *TINY, devices.TWO,
                        f'--config.max_actor_steps={BUDGET}', timeout=300)
  run_dir = os.path.join(workdir, 'tiny')
  summary = reached_budget(result, run_dir, BUDGET)
  # The final evaluation: two games of at most 100 steps (a lost ball ends
  # one sooner), played with the parameters at the budget by R2D2's own
  # recurrent actor. Breakout scores a point a brick.
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == summary['final_eval_episodes'] == 2
  assert final['actor_steps'] >= BUDGET
  assert all(1 <= n <= EPISODE_STEPS for n in final['lengths'])
  assert all(0 <= r <= n for r, n in zip(final['returns'], final['lengths']))
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['identity']['observation_shapes'] == [[10, 10, 4]]
  devices.assert_learner_on(run_dir, 2)

  # The same config and overrides, a larger budget, one device (the state
  # saved on two restored exactly: its digest) and four games per actor.
  # Four games a step reach the budget in seconds, at times before the
  # evaluator's first game ends: the final evaluation is what is checked.
  resumed = devices.resume_on(
      'r2d2_minatar', run_dir, (*TINY, '--config.envs_per_actor=4'),
      devices.ONE, BUDGET, RESUMED_BUDGET)
  devices.assert_learner_on(run_dir, 1)
  assert read_json(os.path.join(run_dir, 'config.json'))['config'][
      'envs_per_actor'] == 4
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == resumed['final_eval_episodes'] == 2
  assert final['actor_steps'] >= RESUMED_BUDGET
  assert all(1 <= n <= EPISODE_STEPS for n in final['lengths'])
  # The counter's episodes (restored, then counted on): each of the four
  # games ended at least one in the resumed run's 400 steps (games of 100
  # steps at most). Not the actor's last metrics row: at a row a second, a
  # fast actor writes one row in all.
  assert resumed['actor_episodes'] - summary['actor_episodes'] >= 4, (
      summary, resumed)


def test_dqn_runs_minatar_with_a_conv_torso_or_an_mlp(cli_module):
  # --dry_run's decision and the text the CLI prints, in this process
  # (r2d2_minatar's --dry_run through the launcher: the test above).
  from acme_launch import describe
  for args in (['--config=dqn_minatar'],
               ['--config=dqn_cartpole', '--config.env_name=minatar:seaquest']):
    launch = cli_module.check_arguments(['launch.py', *args, '--dry_run'])
    assert 'observations: uint8 (10, 10' in describe.dry_run_text(launch)


def test_a_network_that_does_not_fit_the_grid_is_one_line_exit_2(workdir):
  result = run_launcher('--config=r2d2_minatar', f'--workdir={workdir}',
                        '--config.network.conv_kernels=(11,)', timeout=120)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines()
           if l.startswith('acme-launch: error:')]
  assert len(lines) == 1, result.stderr
  assert "do not fit r2d2's 10x10 images of shape (10, 10, 4)" in lines[0]
  assert os.listdir(workdir) == []
