"""Environment families and backends in the launcher: real runs (local_mp)
read back from their run directories, every agent's program built for every
family and backend (check_arguments, in this process but seconds each), and
bad input refused in one line. The same semantics stepped in process:
tests/envs/test_environments.py.
"""

import os

import pytest

from tests.conftest import read_json, run_launcher


def _run(workdir, run_name, config, *args, budget=3000):
  result = run_launcher(config, f'--workdir={workdir}', f'--run_name={run_name}',
                        f'--config.max_actor_steps={budget}', *args)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  # Nothing of gym's deprecation banner in the launcher's terminal.
  assert 'unmaintained' not in result.stdout + result.stderr
  run_dir = os.path.join(workdir, run_name)
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= budget
  assert summary['learner_steps'] > 0
  assert summary['last_eval_return'] is not None
  return run_dir, summary


def test_envpool_batched_actor_reaches_the_budget(workdir):
  # Its resume is the smoke config's, whatever the backend (the session's
  # `resumed` run, tests/e2e/test_checkpointing.py): EnvPool keeps no state
  # a checkpoint holds.
  args = ('--config=smoke', '--config.env_backend=envpool',
          '--config.envs_per_actor=4')
  run_dir, _ = _run(workdir, 'envpool', *args)
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert config['config']['env_backend'] == 'envpool'
  # The actor's episodes end at the smoke config's 100-step limit.
  with open(os.path.join(run_dir, 'metrics', 'actor_0.csv')) as f:
    header = f.readline().strip().split(',')
    lengths = {line.split(',')[header.index('episode_length')] for line in f}
  assert lengths == {'100'}


def test_gymnasium_v5_task_reaches_the_budget(workdir):
  run_dir, _ = _run(workdir, 'gymnasium', '--config=smoke',
                    '--config.env_name=gymnasium:Hopper-v5',
                    '--config.envs_per_actor=2')
  identity = read_json(os.path.join(run_dir, 'config.json'))['identity']
  assert identity['env_name'] == 'gymnasium:Hopper-v5'
  assert identity['observation_shapes'] == [[11]]


@pytest.mark.parametrize('backend', ['gym', 'envpool'])
def test_dmc_task_reaches_the_budget(workdir, backend):
  run_dir, _ = _run(workdir, f'dmc_{backend}', '--config=smoke',
                    '--config.env_name=dmc:cheetah-run',
                    f'--config.env_backend={backend}')
  identity = read_json(os.path.join(run_dir, 'config.json'))['identity']
  assert identity['observation_shapes'] == [[17]]  # position 8 + velocity 9.


def test_envpool_with_an_off_policy_agent_reaches_the_budget(workdir):
  """TD3 writes through one Acme adder per env; EnvPool restarts an env on
  the step after its last, and those adders skip that step."""
  _run(workdir, 'td3_envpool', '--config=td3_mujoco',
       '--config.env_backend=envpool', '--config.envs_per_actor=2',
       '--config.env_max_episode_steps=100', '--config.td3.min_replay_size=200',
       '--config.td3.batch_size=32', '--config.td3.samples_per_insert=32',
       '--config.network.hidden_layers=(16,16)', '--config.eval_every_steps=500',
       '--config.log_every_seconds=1', budget=1200)


@pytest.mark.parametrize('config, env_name, backend', [
    (config, env_name, backend)
    for config in ('ppo_mujoco', 'sac_mujoco', 'td3_mujoco', 'd4pg_mujoco')
    for env_name, backend in (('Walker2d-v4', 'envpool'),
                              ('gymnasium:Walker2d-v5', 'gym'),
                              ('dmc:walker-walk', 'gym'),
                              ('dmc:walker-walk', 'envpool'))] + [
    ('dqn_cartpole', 'CartPole-v1', 'envpool')])
def test_every_agent_plans_every_family_and_backend(cli_module, config,
                                                    env_name, backend):
  """What --dry_run decides, in process: the program builds, with the spec
  of the task (gym and Gymnasium Walker: 17 observations; 6 actions)."""
  launch = cli_module.check_arguments(
      ['launch.py', f'--config={config}', f'--config.env_name={env_name}',
       f'--config.env_backend={backend}'])
  identity = launch.built.identity
  assert identity['env_name'] == env_name
  if config != 'dqn_cartpole':
    mujoco = env_name.startswith(('Walker2d', 'gymnasium:'))
    # dm_control's walker: orientations 14 + height 1 + velocity 9.
    assert identity['observation_shapes'] == ([[17]] if mujoco else [[24]])
    assert identity['action_shapes'] == [[6]]
  assert any(node.startswith('evaluator') for nodes in
             launch.built.nodes_by_label.values() for node in nodes)


@pytest.mark.parametrize('config', ['r2d2_atari', 'impala_atari'])
def test_atari_configs_plan_on_the_gym_backend(cli_module, config):
  """The Atari configs' programs build on Gymnasium + ale-py too, from the
  same (4, 84, 84) frame stacks and Breakout's 4 actions."""
  launch = cli_module.check_arguments(
      ['launch.py', f'--config={config}', '--config.env_name=atari:Breakout',
       '--config.env_backend=gym'])
  identity = launch.built.identity
  assert identity['observation_shapes'] == [[4, 84, 84]]
  assert identity['action_shapes'] == [[]]


@pytest.mark.parametrize('args, expected', [
    (['--config.env_name=nes:Mario'], 'atari:GAME, minatar:GAME or pomdp:TASK'),
    (['--config.env_name=atari:NotAGame'], 'unknown atari game; ale-py has'),
    (['--config.env_name=dmc:walker-fly'], 'known: acrobot-swingup'),
    (['--config.env_name=gymnasium:NoSuchTask-v5'], 'unknown gymnasium task'),
])
def test_bad_env_names_are_refused_before_launch(cli_module, args, expected):
  from acme_launch import errors
  with pytest.raises(errors.LaunchError, match=expected):
    cli_module.check_arguments(['launch.py', '--config=smoke', *args])


@pytest.mark.parametrize('args, expected', [
    (['--config.env_backend=gpu'], 'choose one of: gym, envpool'),
    (['--config.env_name=gymnasium:Hopper-v5', '--config.env_backend=envpool'],
     'envpool does not run'),
])
def test_bad_env_input_is_one_line_exit_2(workdir, args, expected):
  result = run_launcher('--config=smoke', f'--workdir={workdir}', *args)
  assert result.returncode == 2, result.stderr[-2000:]
  error_lines = [l for l in result.stderr.splitlines()
                 if l.startswith('acme-launch: error:')]
  assert len(error_lines) == 1 and expected in error_lines[0], result.stderr
  assert os.listdir(workdir) == []


def test_a_backend_missing_from_the_install_is_one_line_exit_2(workdir,
                                                                tmp_path):
  # A sitecustomize that makes `import envpool` fail, as without the package.
  (tmp_path / 'sitecustomize.py').write_text(
      'import sys\n'
      'class _NoEnvpool:\n'
      '  def find_spec(self, name, path=None, target=None):\n'
      '    if name.split(".")[0] == "envpool":\n'
      '      raise ModuleNotFoundError("No module named %r" % name)\n'
      'sys.meta_path.insert(0, _NoEnvpool())\n')
  result = run_launcher('--config=smoke', '--config.env_backend=envpool',
                        f'--workdir={workdir}',
                        env={'PYTHONPATH': str(tmp_path)})
  assert result.returncode == 2, result.stderr[-2000:]
  error_lines = [l for l in result.stderr.splitlines()
                 if l.startswith('acme-launch: error:')]
  assert len(error_lines) == 1, result.stderr
  assert 'envpool cannot be imported' in error_lines[0]
  assert 'gym, envpool' in error_lines[0]
