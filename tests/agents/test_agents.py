"""Agent configs: SAC, TD3, D4PG (MuJoCo), DQN (CartPole, MinAtar), PPO's LR schedule.

Each config trains for real under `local_mp` (Reverb replay with its rate
limiter, the agent's Acme learner, actor and evaluator) to a small budget with
tiny networks; an off-policy run resumes with its replay contents restored.
"""

import importlib.util
import os
import re

import jax
import numpy as np
import pytest

# compat first: it applies the JAX aliases dm-acme 0.4.0 needs.
from acme_launch import compat  # JAX aliases; before acme
from acme_launch import agents
from acme_launch.program import batched_actor
from acme_launch import envs as environments
from acme_launch.config import registry
from acme import core
from acme import specs
from tests.conftest import read_json, run_launcher

BUDGET = 3000

# Per config: small overrides that keep a real run to about a minute here.
_MUJOCO_SMALL = ('--config.env_max_episode_steps=100',)
SMOKE_OVERRIDES = {
    'sac_mujoco': _MUJOCO_SMALL + (
        '--config.sac.min_replay_size=200', '--config.sac.batch_size=32',
        '--config.sac.samples_per_insert=32',
        '--config.network.hidden_layers=(16,16)',
        '--config.envs_per_actor=2'),  # Batched actor path too.
    'td3_mujoco': _MUJOCO_SMALL + (
        '--config.td3.min_replay_size=200', '--config.td3.batch_size=32',
        '--config.td3.samples_per_insert=32',
        '--config.network.hidden_layers=(16,16)'),
    'd4pg_mujoco': _MUJOCO_SMALL + (
        '--config.d4pg.min_replay_size=200', '--config.d4pg.batch_size=32',
        '--config.d4pg.samples_per_insert=32',
        '--config.network.policy_layers=(16,16)',
        '--config.network.critic_layers=(16,16)',
        '--config.network.num_atoms=11'),
    'dqn_cartpole': (
        '--config.dqn.min_replay_size=200', '--config.dqn.batch_size=32',
        '--config.network.hidden_layers=(16,16)',
        '--config.envs_per_actor=2'),  # Batched actor path too.
    # MinAtar's uint8 grids through the conv torso, two games per actor.
    'dqn_minatar': (
        '--config.dqn.min_replay_size=200', '--config.dqn.batch_size=16',
        '--config.dqn.samples_per_insert=2',
        '--config.network.conv_channels=(4,)',
        '--config.network.hidden_layers=(16,)',
        '--config.env_max_episode_steps=100', '--config.envs_per_actor=2'),
}
COMMON_OVERRIDES = ('--config.num_actors=1', '--config.eval_every_steps=1000',
                    '--config.eval_episodes=1', '--config.log_every_seconds=1')


def _launch(config_name: str, workdir: str, run_name: str, budget: int):
  return run_launcher(f'--config={config_name}', f'--workdir={workdir}',
                      f'--run_name={run_name}',
                      f'--config.max_actor_steps={budget}',
                      *COMMON_OVERRIDES, *SMOKE_OVERRIDES[config_name])


def _summary(run_dir: str) -> dict:
  return read_json(os.path.join(run_dir, 'summary.json'))


def test_every_agent_config_is_in_the_registry_with_a_description():
  configs = registry.available()
  for name in SMOKE_OVERRIDES:
    assert name in configs
    assert registry.description(configs[name])


@pytest.mark.e2e
@pytest.mark.parametrize('config_name', sorted(SMOKE_OVERRIDES))
def test_config_trains_under_local_mp_to_a_small_budget(workdir, config_name):
  result = _launch(config_name, workdir, 'smoke', BUDGET)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  run_dir = os.path.join(workdir, 'smoke')
  summary = _summary(run_dir)
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= BUDGET
  assert summary['learner_steps'] > 0
  assert summary['evaluator_episodes'] >= 1
  assert summary['last_eval_return'] is not None
  # The learner wrote its own metrics (SGD losses) through the shared logger.
  assert os.path.getsize(os.path.join(run_dir, 'metrics', 'learner_0.csv')) > 0


@pytest.mark.e2e
def test_off_policy_resume_restores_the_replay_contents(workdir):
  run_dir = os.path.join(workdir, 'resume')
  first = _launch('td3_mujoco', workdir, 'resume', 2000)
  assert first.returncode == 0, first.stderr[-3000:]
  steps_first = _summary(run_dir)['actor_steps']
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

  second = _launch('td3_mujoco', workdir, 'resume', 4000)
  assert second.returncode == 0, second.stderr[-3000:]
  restored = read_json(restore_record)['table_sizes']
  # Every transition the first run inserted (up to max_replay_size) is back.
  assert restored['priority_table'] > 0
  assert restored['priority_table'] >= steps_first // 2
  summary = _summary(run_dir)
  assert summary['actor_steps'] >= 4000
  assert summary['learner_steps'] > 0


# Launcher-side checks: no processes start, each takes a few seconds.


@pytest.mark.e2e
@pytest.mark.parametrize('args, expected', [
    (['--config=sac_mujoco', '--config.sac.min_replay_size=0'],
     'config.sac.min_replay_size must be a positive integer'),
    (['--config=td3_mujoco', '--config.td3.max_replay_size=10'],
     'config.td3.max_replay_size (10) must be >= min_replay_size'),
    (['--config=d4pg_mujoco', '--config.d4pg.min_replay_size=5'],
     'config.d4pg.samples_per_insert_tolerance_rate is too small'),
    (['--config=dqn_cartpole', '--config.env_name=HalfCheetah-v4'],
     'agent dqn needs discrete actions'),
])
def test_bad_agent_settings_exit_2_before_anything_starts(workdir, args,
                                                          expected):
  result = run_launcher(*args, f'--workdir={workdir}')
  assert result.returncode == 2, result.stderr[-2000:]
  error_lines = [l for l in result.stderr.splitlines()
                 if 'acme-launch: error:' in l]
  assert len(error_lines) == 1, result.stderr
  assert expected in error_lines[0]
  assert os.listdir(workdir) == []


@pytest.mark.parametrize('env_name, action_dims', [
    ('HalfCheetah-v4', 6), ('Hopper-v4', 3)])
def test_sac_target_entropy_is_derived_from_the_action_spec(env_name,
                                                            action_dims):
  config = _load_config('sac_mujoco')
  config.env_name = env_name
  spec = specs.make_environment_spec(
      environments.make_environment(env_name, seed=0))
  builder = agents.load('sac').make_builder(
      config, learner_logger_fn=lambda: None, environment_spec=spec)
  assert builder._config.target_entropy == -action_dims
  assert builder._config.entropy_coefficient is None  # Adaptive by default.


# How each agent's policy parameters are made from its networks.
_POLICY_PARAMS = {
    'sac': lambda networks, key: networks.policy_network.init(key),
    'td3': lambda networks, key: networks.policy_network.init(key),
    'd4pg': lambda networks, key: networks.policy_network.init(key),
    'dqn': lambda networks, key: networks.init(key),
    'ppo': lambda networks, key: networks.network.init(key),
}


class _Params(core.VariableSource):
  """A learner's get_variables: the same params under every name."""

  def __init__(self, params):
    self.params, self.names = params, []

  def get_variables(self, names):
    self.names.append(list(names))
    return [self.params for _ in names]


@pytest.mark.parametrize('config_name', sorted(SMOKE_OVERRIDES) + ['ppo_mujoco'])
def test_adapter_builds_replay_table_and_policies_for_one_or_many_envs(
    config_name):
  config = _load_config(config_name)
  adapter = agents.load(config.agent)
  environment = environments.make_environment(config.env_name, seed=0)
  spec = specs.make_environment_spec(environment)
  builder = adapter.make_builder(config, learner_logger_fn=lambda: None,
                                 environment_spec=spec)
  assert adapter.module_name == f'acme_launch.agents.{config.agent}'
  tables = builder.make_replay_tables(spec)
  if config.agent != 'ppo':  # PPO's is a queue sized in sequences.
    assert [t.info.max_size for t in tables] == [
        config[config.agent].max_replay_size]
  assert adapter.batched_adder == hasattr(builder, 'make_batched_adder')
  networks = adapter.make_networks(config, spec)
  params = _POLICY_PARAMS[config.agent](networks, jax.random.PRNGKey(0))
  # The variable client the batched actors and final evaluation use fetches
  # what the builder's own actor would.
  source = _Params(params)
  client = agents.make_variable_client(adapter, config, source)
  client.update_and_wait()
  assert source.names == [['network' if config.agent == 'ppo' else
                           'policy' if config.agent != 'dqn' else '']]
  observation = environment.reset().observation
  batch = np.stack([observation] * 3)
  for evaluation in (False, True):
    policy = jax.jit(adapter.make_policy(config, networks, spec, evaluation))
    # Batched actor loops (envs_per_actor > 1) call it on stacked
    # observations; policy_returns_extras says what comes back.
    actions, extras = batched_actor.actions_and_extras(
        policy(client.params, jax.random.PRNGKey(1), batch),
        adapter.policy_returns_extras)
    assert actions.shape == (3,) + spec.actions.shape
    assert (extras is not None) == adapter.policy_returns_extras
    if extras and not evaluation:
      assert extras['log_prob'].shape == (3,)
    environment.step(actions[0])


def _load_config(name: str):
  path = registry.available()[name]
  module_spec = importlib.util.spec_from_file_location(f'_cfg_{name}', path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config()


@pytest.mark.parametrize('config_name, section_period, acme_period', [
    ('r2d2_minatar', 50, 400), ('impala_minatar', 100, 1000),
    ('dqn_minatar', None, 1)])
def test_batched_actors_fetch_parameters_as_the_builders_own_actor_does(
    config_name, section_period, acme_period):
  config = _load_config(config_name)
  adapter = agents.load(config.agent)
  section = config[adapter.section]
  assert section.get('variable_update_period') == section_period
  environment = environments.make_environment(config.env_name, seed=0)
  spec = specs.make_environment_spec(environment)

  def periods():
    """(batched actors' client, the builder's own actor's client)."""
    builder = adapter.make_builder(config, learner_logger_fn=lambda: None,
                                   environment_spec=spec)
    networks = adapter.make_networks(config, spec)
    policy = adapter.make_policy(config, networks, spec, evaluation=False)
    # Acme's actors fetch once when made: nothing is stepped here.
    own = builder.make_actor(jax.random.PRNGKey(0), policy,
                             variable_source=_Params(None))
    client = agents.make_variable_client(adapter, config, None)
    return client._update_period, own._variable_client._update_period

  if section_period:  # The config's own setting.
    assert periods() == (section_period, section_period)
    del section.variable_update_period
  # Without it (a config of a user's): Acme's default, as its actor has it.
  assert periods() == (acme_period, acme_period)


def test_ppo_learning_rate_anneals_to_zero_at_the_step_budget():
  config = _load_config('ppo_mujoco')
  config.max_actor_steps = 204_800  # 100 learner steps of 128 x 16 env steps.
  environment = environments.make_environment(config.env_name, seed=0)
  spec = specs.make_environment_spec(environment)
  builder = agents.load('ppo').make_builder(
      config, learner_logger_fn=lambda: None, environment_spec=spec)
  schedule = builder._config.learning_rate
  updates = 100 * config.ppo.num_epochs * config.ppo.num_minibatches
  assert float(schedule(0)) == pytest.approx(config.ppo.learning_rate)
  assert float(schedule(updates // 2)) == pytest.approx(
      config.ppo.learning_rate / 2)
  assert float(schedule(updates)) == 0.0
  config.ppo.anneal_learning_rate = False
  builder = agents.load('ppo').make_builder(
      config, learner_logger_fn=lambda: None, environment_spec=spec)
  assert builder._config.learning_rate == config.ppo.learning_rate
