"""The command line: config listing, dry runs, and bad input rejected up front."""

import os

import pytest

from acme_launch.config import registry
from tests.conftest import REPO_ROOT, run_launcher



def test_list_configs_prints_one_line_per_config():
  result = run_launcher('--list_configs')
  assert result.returncode == 0
  lines = result.stdout.strip().splitlines()
  assert len(lines) == len(registry.available())
  names = [line.split()[0] for line in lines]
  assert 'ppo_mujoco' in names and 'smoke' in names
  assert all(len(line.split(None, 1)) == 2 for line in lines)  # Has a description.


def test_dry_run_prints_nodes_groups_and_placement_and_starts_nothing(workdir):
  result = run_launcher('--config=ppo_mujoco', '--config.num_actors=2',
                        '--dry_run', f'--workdir={workdir}')
  assert result.returncode == 0, result.stderr
  out = result.stdout
  for node in ('replay/0', 'counter/0', 'learner/0', 'actor/0', 'actor/1',
               'evaluator/0'):
    assert node in out
  assert 'own process' in out
  assert 'nothing was started' in out
  assert os.listdir(workdir) == []


def test_dry_run_shows_overrides_in_the_built_program():
  result = run_launcher('--config=ppo_mujoco', '--config.num_actors=5',
                        '--config.env_name=Walker2d-v4', '--dry_run')
  assert result.returncode == 0, result.stderr
  assert 'actor/4' in result.stdout and 'actor/5' not in result.stdout
  assert 'Walker2d-v4' in result.stdout


def test_a_config_file_on_the_old_module_name_runs_with_a_warning(workdir):
  path = os.path.join(REPO_ROOT, 'tests', 'fixtures', 'old_name_config.py')
  result = run_launcher(f'--config={path}', '--dry_run', f'--workdir={workdir}')
  assert result.returncode == 0, result.stderr
  assert 'budget 300 actor steps' in result.stdout
  warned = [l for l in result.stderr.splitlines() if 'DeprecatedName' in l]
  assert len(warned) == 1
  assert '`from acme_launch.config import schema`' in warned[0]


def test_config_given_as_a_path(tmp_path):
  path = os.path.join(registry.CONFIGS_DIR, 'smoke.py')
  result = run_launcher(f'--config={path}', '--dry_run')
  assert result.returncode == 0, result.stderr
  assert 'actor/0' in result.stdout


_BAD_INPUT = [
    (['--config=no_such_config'], "unknown config 'no_such_config'"),
    (['--config=smoke', '--config.num_actorz=2'], 'num_actors'),
    (['--config=smoke', '--config.num_actors=two'], 'num_actors'),
    (['--config=smoke', '--config.ppo.learning_rate=fast'], 'learning_rate'),
    (['--config=smoke', '--config.num_actors=0'], 'num_actors'),
    (['--config=smoke', '--config.max_actor_steps=-5'], 'max_actor_steps'),
    (['--config=smoke', '--config.final_eval_episodes=-1'], 'final_eval_episodes'),
    (['--config=ppo_mujoco', '--config.max_actor_steps=1000000000000'], 'anneal_learning_rate'),
    (['--config=smoke', '--config.ppo.final_observation_rows=False'], 'envs_per_actor'),
    (['--config=smoke', '--launch_type=cluster'], 'launch_type'),
    (['--config=smoke', '--no_such_flag'], 'no_such_flag'),
    (['--config=smoke', '--config.env_name=NoSuchTask-v4'], 'NoSuchTask-v4'),
    (['--config=r2d2_minatar', '--config.env_name=minatar:pong'],
     "'minatar:pong': unknown minatar game; choose one of: minatar:asterix, "
     'minatar:breakout, minatar:freeway, minatar:seaquest, '
     'minatar:space_invaders'),
    ([], '--config is required'),
]


@pytest.mark.parametrize('args, expected', _BAD_INPUT)
def test_bad_input_is_refused_before_anything_starts(cli_module, workdir, args,
                                                     expected):
  # Decided in this process as the launcher decides; its one line and exit
  # 2 for such a refusal: the test below, on a case of each kind.
  from acme_launch import errors
  with pytest.raises(errors.LaunchError) as refused:
    cli_module.check_arguments(['launch.py', *args, f'--workdir={workdir}'])
  assert expected in str(refused.value)
  assert '\n' not in str(refused.value)
  assert os.listdir(workdir) == []


@pytest.mark.parametrize('args, expected', [
    # A flag, a config's name, a config field's check, no config at all.
    _BAD_INPUT[10], _BAD_INPUT[0], _BAD_INPUT[4], _BAD_INPUT[-1]])
def test_bad_input_is_one_line_exit_2_and_starts_nothing(workdir, args, expected):
  result = run_launcher(*args, f'--workdir={workdir}')
  assert result.returncode == 2
  assert 'Traceback' not in result.stderr
  error_lines = [l for l in result.stderr.splitlines() if 'acme-launch: error:' in l]
  assert len(error_lines) == 1, result.stderr
  assert expected in error_lines[0]
  assert result.stdout == ''
  assert os.listdir(workdir) == []
