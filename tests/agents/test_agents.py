"""Agent configs: SAC, TD3, D4PG (MuJoCo), DQN (CartPole, MinAtar), PPO's LR schedule.

In this process: every config is in the registry, SAC's target entropy,
each adapter's replay table and policies for one or many environments,
batched actors fetching parameters as the builder's own actor does.
SMOKE_OVERRIDES, each config's small settings, are shared with the real runs
of the same configs under `local_mp` (tests/e2e/agents/test_agents.py).
"""

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


def test_every_agent_config_is_in_the_registry_with_a_description():
  configs = registry.available()
  for name in SMOKE_OVERRIDES:
    assert name in configs
    assert registry.description(configs[name])


@pytest.mark.parametrize('env_name, action_dims', [
    ('HalfCheetah-v4', 6), ('Hopper-v4', 3)])
def test_sac_target_entropy_is_derived_from_the_action_spec(env_name,
                                                            action_dims):
  config = registry.load('sac_mujoco')
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
  config = registry.load(config_name)
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


@pytest.mark.parametrize('config_name, section_period, acme_period', [
    ('r2d2_minatar', 50, 400), ('impala_minatar', 100, 1000),
    ('dqn_minatar', None, 1)])
def test_batched_actors_fetch_parameters_as_the_builders_own_actor_does(
    config_name, section_period, acme_period):
  config = registry.load(config_name)
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
  config = registry.load('ppo_mujoco')
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
