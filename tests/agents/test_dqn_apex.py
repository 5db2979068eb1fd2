"""DQN's Ape-X epsilons (agents/dqn/policy.py): each environment of each actor has
its own fixed epsilon, and the batched policy explores with it. In process,
on CartPole-v1's spec with a real network."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import jax
import numpy as np
import pytest

from acme_launch.config import registry
from acme_launch import envs
from acme_launch.agents.dqn import networks as dqn_networks
from acme_launch.agents.dqn import policy as dqn_policy


def _config(num_actors=4, envs_per_actor=8, apex=True):
  config = registry.load('dqn_cartpole')
  config.num_actors = num_actors
  config.envs_per_actor = envs_per_actor
  config.dqn.apex_epsilons = apex
  return config


def _cartpole_networks(config):
  """(CartPole-v1's spec, the config's DQN networks, their parameters)."""
  spec = specs.make_environment_spec(
      envs.make_environment('CartPole-v1', seed=0, backend='gym'))
  networks = dqn_networks.make_networks(config, spec)
  return spec, networks, networks.init(jax.random.PRNGKey(0))


def test_the_run_s_environments_get_ape_x_s_epsilons_in_actor_order():
  config = _config()
  epsilons = np.concatenate([dqn_policy.actor_epsilons(config, a) for a in range(4)])
  n = 4 * 8
  np.testing.assert_allclose(
      epsilons, 0.4 ** (1 + 7 * np.arange(n) / (n - 1)))
  assert epsilons[0] == pytest.approx(0.4)
  assert epsilons[-1] == pytest.approx(0.4 ** 8)
  # One env per actor, one actor: Ape-X's first epsilon.
  np.testing.assert_allclose(
      dqn_policy.actor_epsilons(_config(num_actors=1, envs_per_actor=1), 0), [0.4])
  # Off, or not an actor (the evaluator, the launcher's checks): none.
  assert dqn_policy.actor_epsilons(_config(apex=False), 0) is None
  assert dqn_policy.actor_epsilons(config, None) is None


def test_the_batched_policy_explores_with_each_environment_s_epsilon():
  config = _config(num_actors=2, envs_per_actor=2)
  spec, networks, params = _cartpole_networks(config)
  observations = np.stack([np.full(4, 0.1, np.float32)] * 2)
  greedy = np.asarray(networks.apply(params, observations)).argmax(-1)

  def non_greedy_fraction(policy, samples=4000):
    keys = jax.random.split(jax.random.PRNGKey(1), samples)
    actions = jax.jit(jax.vmap(lambda k: policy(params, k, observations)))(
        keys)
    return np.mean(np.asarray(actions) != greedy, axis=0)

  # Actor 1's environments are the run's 2nd and 3rd of 4: epsilons
  # 0.4**(1 + 7*2/3) and 0.4**8; a random action is the greedy one half the
  # time on CartPole's two actions.
  expected = dqn_policy.actor_epsilons(config, 1) / 2
  fraction = non_greedy_fraction(
      dqn_policy.make_policy(config, networks, spec, evaluation=False,
                      actor_index=1))
  np.testing.assert_allclose(fraction, expected, atol=0.01)
  # Actor 0's first environment: 0.4, so 20% non-greedy.
  fraction = non_greedy_fraction(
      dqn_policy.make_policy(config, networks, spec, evaluation=False,
                      actor_index=0))
  assert fraction[0] == pytest.approx(0.2, abs=0.025)
  # The evaluator keeps config.dqn.eval_epsilon (0: greedy).
  fraction = non_greedy_fraction(
      dqn_policy.make_policy(config, networks, spec, evaluation=True))
  np.testing.assert_array_equal(fraction, [0, 0])


def test_one_environment_actors_use_their_first_epsilon():
  config = _config(num_actors=2, envs_per_actor=1)
  spec, networks, params = _cartpole_networks(config)
  observation = np.full(4, 0.1, np.float32)
  greedy = int(np.asarray(networks.apply(params, observation[None])).argmax())
  # Acme's actor passes its own epsilon (dqn.epsilon): Ape-X's wins.
  policy = dqn_policy.make_policy(config, networks, spec, evaluation=False,
                           actor_index=0)
  keys = jax.random.split(jax.random.PRNGKey(2), 4000)
  actions = jax.jit(jax.vmap(lambda k: policy(params, k, observation, 0.9)))(
      keys)
  assert np.mean(np.asarray(actions) != greedy) == pytest.approx(0.2, abs=0.025)
