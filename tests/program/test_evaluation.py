"""Evaluations' batched episodes equal episodes played one by one."""

from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme.jax import variable_utils
import jax
import jax.numpy as jnp
import numpy as np

from acme_launch import envs as environments
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
