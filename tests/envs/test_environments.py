"""Environment families and backends: the same semantics on every backend,
stepped in this process (real runs of them: tests/e2e/envs/)."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import os

import dm_env
import numpy as np
import pytest

from acme_launch import envs as environments


def _batch(env_name, backend, num_envs, max_episode_steps, seed=0):
  seeds = [seed + i for i in range(num_envs)]
  return environments.make_environments(env_name, seeds, max_episode_steps,
                                        backend)


def _episodes(envs, policy, episodes_per_env):
  """Plays until each env ended `episodes_per_env` episodes, as the batched
  actor does; returns (length, return, final discount) per episode."""
  timesteps = envs.reset()
  n = envs.num_envs
  lengths, returns = np.zeros(n, int), np.zeros(n)
  done = np.zeros(n, int)
  results = []
  while (done < episodes_per_env).any():
    timesteps = envs.step(policy(timesteps.observation))
    for i in range(n):
      if timesteps.first()[i]:  # EnvPool restarted it: not a step.
        continue
      lengths[i] += 1
      returns[i] += timesteps.reward[i]
      if timesteps.last()[i]:
        if done[i] < episodes_per_env:
          results.append((lengths[i], returns[i], float(timesteps.discount[i])))
        done[i] += 1
        lengths[i], returns[i] = 0, 0.0
    if not envs.auto_reset and timesteps.last().any():
      ended = np.flatnonzero(timesteps.last())
      restarted = envs.reset_some(ended)
      observation = timesteps.observation.copy()
      observation[ended] = restarted.observation
      timesteps = timesteps._replace(observation=observation)
  return results


def _linear_policy(env_name, scale=0.3):
  """A fixed deterministic policy: tanh of a seeded linear map."""
  spec = specs.make_environment_spec(environments.make_environment(env_name, 0))
  weights = np.random.default_rng(7).normal(
      0, scale, (spec.observations.shape[0], spec.actions.shape[0]))
  return lambda obs: np.tanh(obs @ weights).astype(np.float32)


def _spec_fields(spec):
  fields = {'shape': spec.shape, 'dtype': spec.dtype, 'name': spec.name,
            'type': type(spec).__name__}
  if isinstance(spec, specs.DiscreteArray):
    fields['num_values'] = spec.num_values
  elif isinstance(spec, specs.BoundedArray):
    fields['minimum'] = np.broadcast_to(spec.minimum, spec.shape).tolist()
    fields['maximum'] = np.broadcast_to(spec.maximum, spec.shape).tolist()
  return fields


@pytest.mark.parametrize('env_name', ['HalfCheetah-v4', 'Hopper-v4',
                                      'CartPole-v1', 'dmc:walker-walk',
                                      'dmc:cartpole-swingup'])
def test_envpool_specs_equal_the_gym_backends(env_name):
  gym_spec = specs.make_environment_spec(
      environments.make_environment(env_name, 0))
  envpool_spec = specs.make_environment_spec(
      environments.make_environment(env_name, 0, backend='envpool'))
  for gym_field, envpool_field in zip(gym_spec, envpool_spec):
    assert _spec_fields(gym_field) == _spec_fields(envpool_field)


@pytest.mark.parametrize('backend', ['gym', 'envpool'])
def test_dmc_observation_fields_are_concatenated_in_sorted_order(backend):
  # walker: height (1), orientations (14), velocity (9), sorted by name as
  # Acme's ConcatObservationWrapper does. Every episode starts with the
  # torso 1.3 m up (only the joint angles are random).
  envs = _batch('dmc:walker-walk', backend, num_envs=4, max_episode_steps=0)
  observations = envs.reset().observation
  np.testing.assert_allclose(observations[:, 0], 1.3, atol=1e-5)
  orientations = observations[:, 1:15].reshape(4, 7, 2)
  np.testing.assert_allclose(np.linalg.norm(orientations, axis=2), 1.0,
                             atol=1e-4)


@pytest.mark.parametrize('env_name, backend', [
    ('HalfCheetah-v4', 'gym'), ('HalfCheetah-v4', 'envpool'),
    ('gymnasium:HalfCheetah-v5', 'gym'), ('dmc:cheetah-run', 'gym'),
    ('dmc:cheetah-run', 'envpool')])
def test_time_limit_ends_episodes_at_its_length_with_discount_1(env_name,
                                                                backend):
  envs = _batch(env_name, backend, num_envs=3, max_episode_steps=40)
  action_shape = environments.make_environment(env_name, 0).action_spec().shape
  zero = np.zeros((3,) + action_shape, np.float32)
  episodes = _episodes(envs, lambda obs: zero, episodes_per_env=2)
  assert len(episodes) == 6
  assert all(length == 40 and discount == 1.0
             for length, _, discount in episodes), episodes


def _async_episodes(envs, steps):
  """Steps EnvPool's async mode with zero actions; (env, length, discount)
  of each episode that ended, in order."""
  timesteps, lengths, ended = envs.reset(), np.zeros(envs.num_envs, int), []
  for _ in range(steps):
    envs.send(np.zeros((len(timesteps.env_id), 6), np.float32),
              timesteps.env_id)
    timesteps = envs.recv()
    for row, i in enumerate(timesteps.env_id):
      if timesteps.first()[row]:
        lengths[i] = 0
        continue
      lengths[i] += 1
      if timesteps.last()[row]:
        ended.append((i, lengths[i], float(timesteps.discount[row])))
  return ended


def test_staggered_starts_end_each_first_episode_at_its_own_step():
  # All HalfCheetah episodes run to the limit: without staggering, every
  # environment restarts at the same step, run after run.
  def pool(stagger):
    return environments.make_environments(
        'HalfCheetah-v4', [5, 6, 7, 8], max_episode_steps=40,
        backend='envpool', async_envs=8, stagger_starts=stagger)
  plain = _async_episodes(pool(False), 200)
  staggered = _async_episodes(pool(True), 200)
  assert {length for _, length, _ in plain} == {40}
  first = {}
  for i, length, discount in staggered:
    first.setdefault(i, length)
    assert discount == 1.0  # Cut as a time limit cuts it.
  assert len(first) == 8 and len(set(first.values())) > 4, first
  assert all(1 <= length <= 40 for length in first.values())
  later = [length for k, (i, length, _) in enumerate(staggered)
           if any(j == i for j, _, _ in staggered[:k])]
  assert later and set(later) == {40}  # Then whole episodes.
  # The same seed, the same cuts.
  assert _async_episodes(pool(True), 200) == staggered


@pytest.mark.parametrize('env_name, backend', [
    ('Hopper-v4', 'gym'), ('Hopper-v4', 'envpool'),
    ('gymnasium:Hopper-v5', 'gym')])
def test_discount_is_0_only_on_true_termination(env_name, backend):
  # Strong random actions make Hopper fall well before the 100-step limit.
  rng = np.random.default_rng(0)
  envs = _batch(env_name, backend, num_envs=4, max_episode_steps=100)
  episodes = _episodes(envs, lambda obs: rng.uniform(-1, 1, (4, 3)),
                       episodes_per_env=3)
  fell = [e for e in episodes if e[0] < 100]
  at_limit = [e for e in episodes if e[0] == 100]
  assert fell, episodes  # Some terminations seen...
  assert all(discount == 0.0 for _, _, discount in fell)
  assert all(discount == 1.0 for _, _, discount in at_limit)


@pytest.mark.parametrize('env_name', ['HalfCheetah-v4', 'Hopper-v4',
                                      'Walker2d-v4', 'dmc:walker-walk'])
def test_a_fixed_policy_scores_the_same_on_envpool_and_gym(env_name):
  """Same task, same policy: mean returns within noise of each other (for a
  dm_control task this also checks EnvPool's observation fields are
  concatenated in the gym backend's order)."""
  policy = _linear_policy(env_name)
  means, errors = [], []
  for backend in ('gym', 'envpool'):
    envs = _batch(env_name, backend, num_envs=16, max_episode_steps=200,
                  seed=100)
    returns = np.array([r for _, r, _ in _episodes(envs, policy, 2)])
    means.append(returns.mean())
    errors.append(returns.std(ddof=1) / np.sqrt(len(returns)))
  # Reset noise differs per seed; 4 standard errors plus 5% covers it.
  tolerance = 4 * np.hypot(*errors) + 0.05 * abs(np.mean(means))
  assert abs(means[0] - means[1]) <= tolerance, (means, errors)


def test_gymnasium_adapter_speaks_dm_env():
  environment = environments.make_environment('gymnasium:Hopper-v5', seed=3)
  first = environment.reset()
  assert first.step_type == dm_env.StepType.FIRST
  assert first.observation.dtype == np.float32
  assert environment.action_spec().minimum.tolist() == [-1.0] * 3
  # Same seed, same first observation: the adapter seeds the first reset.
  again = environments.make_environment('gymnasium:Hopper-v5', seed=3).reset()
  np.testing.assert_array_equal(first.observation, again.observation)


def test_a_dm_control_task_leaves_the_process_rendering_choice_alone(
    monkeypatch):
  """Physics-only dm_control sets MUJOCO_GL=disable for its own import
  only: a filmed evaluation started from this process afterwards (its
  child inherits os.environ) still gets an off-screen renderer."""
  monkeypatch.delenv('MUJOCO_GL', raising=False)
  environments.make_environment('dmc:cartpole-swingup', seed=0)
  assert 'MUJOCO_GL' not in os.environ
