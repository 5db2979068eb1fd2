"""End-to-end: `impala_minatar` (Acme's IMPALA on MinAtar Breakout) under
local_mp to a tiny budget with a final evaluation (its learner on two
devices), then resumed on one device with two games per actor (the batched
recurrent actor) to a larger one, and on two again;
`impala_atari` planned with its replay memory; a bad IMPALA setting refused
before anything starts."""

import os


from tests.conftest import (node_records, reached_budget, read_json,
                            run_launcher)
from tests.e2e.conftest import dry_run_stdout
from tests.e2e.agents import test_devices as devices


BUDGET, RESUMED_BUDGET, SECOND_RESUMED_BUDGET = 400, 700, 1000
EPISODE_STEPS = 100  # Games cut short: evaluations take a second.
# One actor, 5-step sequences (4 trained + 1 bootstrap) in a queue of 8,
# batches of 2, and the config's torso shape (3x3, stride 1) at 4
# channels with an LSTM of 8.
TINY = (
    '--config.num_actors=1',
    '--config.eval_every_steps=300', '--config.eval_episodes=1',
    '--config.final_eval_episodes=2',
    f'--config.env_max_episode_steps={EPISODE_STEPS}',
    '--config.log_every_seconds=1',
    '--config.impala.sequence_length=5', '--config.impala.batch_size=2',
    '--config.impala.max_queue_size=8',
    '--config.impala.variable_update_period=10',
    '--config.network.conv_channels=(4,)', '--config.network.lstm_size=8')


def _one_error_line(result) -> str:
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines()
           if l.startswith('acme-launch: error:')]
  assert len(lines) == 1, result.stderr
  return lines[0]


def test_impala_minatar_trains_on_two_devices_evaluates_and_resumes_on_one_with_two_games_then_on_two(
    workdir):
  """One program read for the family's and the devices' promises
  (tests/e2e/agents/test_devices.py): the tiny run on two learner devices,
  resumed on one device with two games per actor, then on two again."""
  # One game per actor: Acme's own IMPALAActor and SequenceAdder; batches
  # of 2, one on each device.
  tiny = (*TINY, '--config.envs_per_actor=1')
  result = run_launcher('--config=impala_minatar', f'--workdir={workdir}',
                        '--run_name=tiny', *tiny, devices.TWO,
                        f'--config.max_actor_steps={BUDGET}', timeout=300)
  run_dir = os.path.join(workdir, 'tiny')
  summary = reached_budget(result, run_dir, BUDGET)
  devices.assert_learner_on(run_dir, 2)
  assert len(node_records(run_dir)['actor/0']['jax_devices']) == 1
  # The learner trained on the queue: its losses are in its metrics.
  learner_csv = os.path.join(run_dir, 'metrics', 'learner_0.csv')
  with open(learner_csv) as f:
    header = f.readline()
  assert 'loss' in header.split(','), header
  # The final evaluation: two games of at most 100 steps (a lost ball ends
  # one sooner), played with the parameters at the budget by IMPALA's own
  # recurrent actor. Breakout scores a point a brick.
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == summary['final_eval_episodes'] == 2
  assert final['actor_steps'] >= BUDGET
  assert all(1 <= n <= EPISODE_STEPS for n in final['lengths'])
  assert all(0 <= r <= n for r, n in zip(final['returns'], final['lengths']))

  # Resumed with a larger budget, on one device (the state saved on two
  # restored exactly: its digest) and two games per actor (the batched
  # recurrent actor, make_actor_core's core): the learner (parameters and
  # optimizer), the counter and the queue's sequences (Reverb's checkpoint
  # at the stop) come back; the actors start new games with a fresh LSTM
  # state.
  devices.resume_on('impala_minatar', run_dir,
                    (*TINY, '--config.envs_per_actor=2'), devices.ONE,
                    BUDGET, RESUMED_BUDGET)
  devices.assert_learner_on(run_dir, 1)
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['config']['envs_per_actor'] == 2
  restored = read_json(os.path.join(run_dir, 'nodes', 'replay_restore.json'))
  assert 0 <= restored['table_sizes']['priority_table'] <= 8  # The queue.
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == 2 and final['actor_steps'] >= RESUMED_BUDGET

  # And on two devices again, from the state saved on one.
  devices.resume_on('impala_minatar', run_dir, tiny, devices.TWO,
                    RESUMED_BUDGET, SECOND_RESUMED_BUDGET)
  devices.assert_learner_on(run_dir, 2)


def test_impala_atari_plans_the_deep_network_and_its_queue(cli_module,
                                                           workdir):
  # In process (--dry_run through the launcher: tests/e2e/test_minatar.py).
  stdout = dry_run_stdout(cli_module, '--config=impala_atari',
                           f'--workdir={workdir}')
  assert 'impala on atari:Pong' in stdout
  assert 'observations: uint8 (4, 84, 84) in [0, 255]' in stdout
  assert 'actor/7' in stdout and 'actor/8' not in stdout
  lines = stdout.splitlines()
  (first,) = [l for l in lines if l.startswith('replay/0 memory: about ')]
  table = lines[lines.index(first) + 1]
  # 320 sequences of 20 steps, one every 19: a queue of 6,080 steps.
  assert "table 'priority_table': 320 items x 19 new steps" in table
  # Its queue is checkpointed like any table (checkpoint.replay is on).
  assert lines[lines.index(first) + 2].startswith(
      '  + room for its checkpoints, about ')
  assert '--config.impala.max_queue_size' in lines[lines.index(first) + 3]
  assert os.listdir(workdir) == []


def test_a_sampling_rate_above_one_is_one_line_exit_2(workdir):
  # Acme's builder would raise it in the replay node, after launch; the
  # other settings' checks are in tests/agents/test_impala.py.
  result = run_launcher('--config=impala_minatar', f'--workdir={workdir}',
                        '--config.impala.samples_per_insert=2.0', timeout=120)
  assert ('config.impala.samples_per_insert must be in (0, 1]' in
          _one_error_line(result))
  assert os.listdir(workdir) == []
