"""Agent configs trained for real under `local_mp` (Reverb replay with its rate
limiter, the agent's Acme learner, actor and evaluator) to a small budget
with tiny networks; an off-policy run resumes with its replay contents
restored; bad agent settings stop the launcher before anything starts.

The per-config overrides are those the in-process tests of the same configs
read (tests/agents/test_agents.py).
"""

import os
import re

import pytest

from tests.agents.test_agents import SMOKE_OVERRIDES
from tests.conftest import read_json, run_launcher

BUDGET = 2000  # Two evaluations (every 1,000 steps); learner steps from 200 on.
COMMON_OVERRIDES = ('--config.num_actors=1', '--config.eval_every_steps=1000',
                    '--config.eval_episodes=1', '--config.log_every_seconds=1')


def _launch(config_name: str, workdir: str, run_name: str, budget: int):
  return run_launcher(f'--config={config_name}', f'--workdir={workdir}',
                      f'--run_name={run_name}',
                      f'--config.max_actor_steps={budget}',
                      *COMMON_OVERRIDES, *SMOKE_OVERRIDES[config_name])


def _summary(run_dir: str) -> dict:
  return read_json(os.path.join(run_dir, 'summary.json'))


def _trained_to(run_dir: str, budget: int) -> dict:
  """The summary of a run at its budget, evaluated during the run, with the
  learner's own metrics (SGD losses) written through the shared logger."""
  summary = _summary(run_dir)
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= budget
  assert summary['learner_steps'] > 0
  assert summary['evaluator_episodes'] >= 1
  assert summary['last_eval_return'] is not None
  assert os.path.getsize(os.path.join(run_dir, 'metrics', 'learner_0.csv')) > 0
  return summary


# td3_mujoco's small run is the first run of the resume test below.
RESUMED_CONFIG = 'td3_mujoco'


@pytest.mark.parametrize('config_name', [
    name for name in sorted(SMOKE_OVERRIDES) if name != RESUMED_CONFIG])
def test_config_trains_under_local_mp_to_a_small_budget(workdir, config_name):
  result = _launch(config_name, workdir, 'smoke', BUDGET)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  _trained_to(os.path.join(workdir, 'smoke'), BUDGET)


def test_td3_trains_under_local_mp_to_a_small_budget_and_resume_restores_the_replay_contents(
    workdir):
  """td3_mujoco's small run (the checks of the test above), then the
  off-policy resume: its replay contents come back."""
  run_dir = os.path.join(workdir, 'resume')
  first = _launch(RESUMED_CONFIG, workdir, 'resume', BUDGET)
  assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
  steps_first = _trained_to(run_dir, BUDGET)['actor_steps']
  replay_dir = os.path.join(run_dir, 'checkpoints', 'replay')
  assert os.listdir(replay_dir), 'no replay checkpoint after the first run'
  # After a checkpoint the replay node hands freed memory back (node/memory.py).
  with open(os.path.join(run_dir, 'logs', 'replay_0.log')) as f:
    assert re.search(r'Saved replay checkpoint .*; returned \d+ MiB of freed '
                     'memory to the system', f.read())
  # The replay node records its table sizes right after restoring; clear the
  # first run's record so what is read below is the second run's.
  restore_record = os.path.join(run_dir, 'nodes', 'replay_restore.json')
  if os.path.exists(restore_record):
    os.remove(restore_record)

  second = _launch(RESUMED_CONFIG, workdir, 'resume', 2 * BUDGET)
  assert second.returncode == 0, second.stderr[-3000:]
  restored = read_json(restore_record)['table_sizes']
  # Every transition the first run inserted (up to max_replay_size) is back.
  assert restored['priority_table'] > 0
  assert restored['priority_table'] >= steps_first // 2
  summary = _summary(run_dir)
  assert summary['actor_steps'] >= 2 * BUDGET
  assert summary['learner_steps'] > 0


BAD_AGENT_SETTINGS = [
    (['--config=sac_mujoco', '--config.sac.min_replay_size=0'],
     'config.sac.min_replay_size must be a positive integer'),
    (['--config=td3_mujoco', '--config.td3.max_replay_size=10'],
     'config.td3.max_replay_size (10) must be >= min_replay_size'),
    (['--config=d4pg_mujoco', '--config.d4pg.min_replay_size=5'],
     'config.d4pg.samples_per_insert_tolerance_rate is too small'),
    (['--config=dqn_cartpole', '--config.env_name=HalfCheetah-v4'],
     'agent dqn needs discrete actions'),
]


def test_a_bad_agent_setting_exits_2_in_one_line_before_anything_starts(
    workdir):
  # Through the launcher, once; every setting is decided in process below
  # (the LaunchError whose line the launcher prints).
  args, expected = BAD_AGENT_SETTINGS[0]
  result = run_launcher(*args, f'--workdir={workdir}')
  assert result.returncode == 2, result.stderr[-2000:]
  error_lines = [l for l in result.stderr.splitlines()
                 if 'acme-launch: error:' in l]
  assert len(error_lines) == 1, result.stderr
  assert expected in error_lines[0]
  assert os.listdir(workdir) == []


@pytest.mark.parametrize('args, expected', BAD_AGENT_SETTINGS)
def test_bad_agent_settings_are_one_line_launch_errors_before_anything_starts(
    cli_module, workdir, args, expected):
  from acme_launch import errors
  with pytest.raises(errors.LaunchError) as raised:
    cli_module.check_arguments(['launch.py', *args, f'--workdir={workdir}'])
  assert '\n' not in str(raised.value), str(raised.value)
  assert expected in str(raised.value)
  assert os.listdir(workdir) == []
