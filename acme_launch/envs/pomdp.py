"""The pomdp family: control tasks with their velocities hidden.

`pomdp:CartPole-v1` is Gymnasium's CartPole-v1 whose observation keeps the
cart's position and the pole's angle and drops both velocities;
`pomdp:Pendulum-v1` keeps the pendulum's cos and sin and drops its angular
velocity. What was dropped is what a policy needs, and the last few
observations hold it: an agent with memory (R2D2's LSTM) can recover it, a
feed-forward agent of the same size sees one frame and cannot. They are the
memory tasks of docs/environments.md#pomdp: small enough to learn on a CPU
in minutes.

Everything else is Gymnasium's task as it is (dynamics, rewards, time
limits, seeding), through the same dm_env adapter as the gymnasium family.
"""

from typing import Dict, Tuple

from acme_launch import errors
from acme_launch.envs import registry

FAMILY = 'pomdp'
# Task -> the indices of Gymnasium's observation that are kept.
KEPT: Dict[str, Tuple[int, ...]] = {
    'CartPole-v1': (0, 2),   # x, theta (of x, x_dot, theta, theta_dot)
    'Pendulum-v1': (0, 1),   # cos, sin (of cos, sin, theta_dot)
}


def unknown_task_message(env_name: str) -> str:
  return (f'config.env_name {env_name!r}: unknown pomdp task; known: '
          f'{", ".join(f"{FAMILY}:{t}" for t in KEPT)}')


def check(name: str, env_name: str, backend: str) -> None:
  if name not in KEPT:
    raise errors.LaunchError(unknown_task_message(env_name))


def make(name: str, seed: int, max_episode_steps: int):
  """The task as a dm_env environment (envs/families.py's adapter)."""
  import gymnasium
  import numpy as np
  from acme_launch.envs import families

  kept = np.asarray(KEPT[name])
  kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
  full = gymnasium.make(name, **kwargs)
  space = full.observation_space
  observation_space = gymnasium.spaces.Box(
      space.low[kept], space.high[kept], dtype=space.dtype)
  masked = gymnasium.wrappers.TransformObservation(
      full, lambda observation: observation[kept], observation_space)
  return families.GymnasiumEnvironment(masked, seed)


POMDP = registry.register_family(registry.Family(
    FAMILY, ('gym',), ('gymnasium',), check, make, example='pomdp:TASK',
    backend_error='config.env_backend {backend} does not run pomdp tasks '
    '(they hide part of a Gymnasium task\'s observation): use '
    'config.env_backend=gym'))
