"""Evaluations' batched episodes equal episodes played one by one."""

import os

from acme_launch import compat  # JAX aliases; before acme
import acme
from acme import core
from acme import specs
from acme.jax import variable_utils
from acme.utils import loggers
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch.config import registry
from acme_launch.program import evaluation


def _zero_policy(action_size):
  def policy(params, key, observations):
    del params, key
    return jnp.zeros((observations.shape[0], action_size), jnp.float32)
  return policy


def _play_one(environment, action_size):
  timestep, total, length = environment.reset(), 0.0, 0
  while not timestep.last():
    timestep = environment.step(np.zeros(action_size, np.float32))
    total += timestep.reward
    length += 1
  return total, length


def test_batched_episodes_match_sequential_ones_with_early_terminations():
  # Hopper falls over and terminates at different steps per seed: the batch
  # must keep stepping the others and stop counting the finished ones.
  seeds = [3, 14, 15]
  make = lambda seed: environments.make_environment('Hopper-v4', seed=seed)
  action_size = make(0).action_spec().shape[0]

  result = evaluation.play_episodes([make(s) for s in seeds],
                                    _zero_policy(action_size), params=None,
                                    random_key=np.zeros(2, np.uint32),
                                    policy_returns_extras=False)

  expected = [_play_one(make(s), action_size) for s in seeds]
  assert result['lengths'] == [length for _, length in expected]
  np.testing.assert_allclose(result['returns'], [r for r, _ in expected],
                             rtol=1e-5)
  assert len(set(result['lengths'])) > 1  # Really unequal episode ends.
  assert max(result['lengths']) < 1000


class _Source(core.VariableSource):
  """The learner's side of a variable client, in this process."""

  def get_variables(self, names):
    return [{} for _ in names]


def test_evaluations_continue_each_environments_stream():
  # Made once, the environments are not re-made at the next evaluation:
  # its episodes are each environment's next ones, as one by one.
  seeds = [3, 14]
  make = lambda seed: environments.make_environment('Hopper-v4', seed=seed)
  action_size = make(0).action_spec().shape[0]
  evaluation_ = evaluation.Evaluation(
      make, seeds, _zero_policy(action_size),
      variable_utils.VariableClient(_Source(), 'policy'),
      jax.random.PRNGKey(0), policy_returns_extras=False)

  first, second = evaluation_.run(), evaluation_.run()

  one_by_one = [make(s) for s in seeds]
  expected_first = [_play_one(e, action_size) for e in one_by_one]
  expected_second = [_play_one(e, action_size) for e in one_by_one]
  assert evaluation_.episodes == 2
  assert first['lengths'] == [length for _, length in expected_first]
  assert second['lengths'] == [length for _, length in expected_second]
  np.testing.assert_allclose(second['returns'],
                             [r for r, _ in expected_second], rtol=1e-5)
  assert second['lengths'] != first['lengths']  # Really new episodes.


# A trained ppo_mujoco policy (HalfCheetah-v4, 1M steps, its observation
# normalizer included): its final evaluation stood still in 6 of 10
# episodes (docs/results.md). Module/parameter names as keys.
_TRAINED_PPO = os.path.join(os.path.dirname(__file__), 'data',
                            'ppo_halfcheetah_params.npz')


def _trained_ppo_params():
  params = {}
  with np.load(_TRAINED_PPO) as arrays:
    for key in arrays.files:
      module, name = key.rsplit('/', 1)
      params.setdefault(module, {})[name] = arrays[key]
  return params


class _Params(core.VariableSource):

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
def test_final_evaluation_equals_acme_loop_one_env_at_a_time(backend):
  # The final evaluation's path (all seeds' episodes at once, one batched
  # policy call a step, parameters from a variable client) against Acme's
  # actor and EnvironmentLoop on one environment at a time: same seeds, same
  # saved policy, same returns. Episodes are cut at 20 steps: the two paths'
  # actions differ by float32 rounding (about 3e-7, batch shapes), which
  # this task's dynamics grow to whole different episodes in a few hundred
  # steps.
  config = registry.load('ppo_mujoco')
  adapter = agents.load('ppo')
  make = lambda seed: environments.make_environment(
      config.env_name, seed, max_episode_steps=20, backend=backend,
      evaluation=True)
  environment_spec = specs.make_environment_spec(make(0))
  networks = adapter.make_networks(config, environment_spec)
  policy = adapter.make_policy(config, networks, environment_spec,
                               evaluation=True)
  source = _Params(_trained_ppo_params())
  seeds = [11, 12, 13, 14]
  key = jax.random.PRNGKey(0)

  final = evaluation.Evaluation(
      make, seeds, policy,
      variable_utils.VariableClient(source, adapter.actor_variables), key,
      adapter.policy_returns_extras).run()

  builder = adapter.make_builder(config, loggers.NoOpLogger, environment_spec)
  one_by_one = []
  for seed in seeds:
    loop = acme.EnvironmentLoop(
        make(seed), builder.make_actor(key, policy, variable_source=source),
        logger=loggers.NoOpLogger(), should_update=False)
    one_by_one.append(float(loop.run_episode()['episode_return']))
  assert final['lengths'] == [20] * len(seeds)
  np.testing.assert_allclose(final['returns'], one_by_one, atol=0.05)
  assert len(set(np.round(one_by_one))) == len(seeds)  # Really per seed.
