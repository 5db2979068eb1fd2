"""The pomdp family: Gymnasium control tasks with their velocities hidden,
as dm_env; the kept part equals the full task's, step for step. In
process, no launch."""

from acme_launch import compat  # JAX aliases; before acme
import numpy as np
import pytest

from acme_launch import envs as environments
from acme_launch import errors
from acme_launch.envs import pomdp


def _observations(env_name, seed, actions):
  environment = environments.make_environment(env_name, seed)
  observations = [environment.reset().observation]
  ends = []
  for action in actions:
    timestep = environment.step(action)
    observations.append(timestep.observation)
    if timestep.last():
      ends.append((len(observations) - 1, float(timestep.discount)))
      observations.append(environment.reset().observation)
  return np.stack(observations), ends, environment


def test_cartpole_keeps_position_and_angle_of_the_same_game():
  actions = np.random.default_rng(0).integers(0, 2, size=300)
  masked, masked_ends, environment = _observations('pomdp:CartPole-v1', 3,
                                                   actions)
  full, full_ends, _ = _observations('gymnasium:CartPole-v1', 3, actions)
  assert environment.observation_spec().shape == (2,)
  assert environment.action_spec().num_values == 2
  assert full.shape[1] == 4
  np.testing.assert_array_equal(masked, full[:, [0, 2]])
  # Random play drops the pole: several episodes, each ended with discount 0.
  assert masked_ends == full_ends and len(masked_ends) >= 5
  assert all(discount == 0.0 for _, discount in masked_ends)


def test_pendulum_keeps_cos_and_sin():
  actions = np.random.default_rng(1).uniform(-1, 1, size=(50, 1)).astype(
      np.float32)
  masked, _, environment = _observations('pomdp:Pendulum-v1', 5, actions)
  full, _, _ = _observations('gymnasium:Pendulum-v1', 5, actions)
  assert environment.observation_spec().shape == (2,)
  np.testing.assert_allclose(masked, full[:, :2])
  np.testing.assert_allclose(masked[:, 0]**2 + masked[:, 1]**2, 1.0, rtol=1e-5)


@pytest.mark.parametrize('env_name, backend, expected', [
    ('pomdp:MountainCar-v0', 'gym', "'pomdp:MountainCar-v0': unknown pomdp "
     'task; known: pomdp:CartPole-v1, pomdp:Pendulum-v1'),
    ('pomdp:CartPole-v1', 'envpool', 'use config.env_backend=gym'),
])
def test_bad_pomdp_input_is_one_line(env_name, backend, expected):
  with pytest.raises(errors.LaunchError) as raised:
    environments.check_task(env_name, backend)
  assert expected in str(raised.value)
  assert '\n' not in str(raised.value)


def test_every_task_passes_the_check():
  for name in pomdp.KEPT:
    task = environments.check_task(f'pomdp:{name}', 'gym')
    assert task == environments.Task('pomdp', name)
