"""The families' own libraries: gym, Gymnasium (our dm_env adapter) and the
dm_control suite, one environment each."""

import os
from typing import Optional

from absl import logging
from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme import wrappers
import dm_env

from acme_launch.envs import user


def dmc_domain_task(name: str):
  domain, _, task = name.partition('-')
  return domain, task.replace('-', '_')


def make_gym(name: str, seed: int, max_episode_steps: int):
  import warnings
  import gym
  kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
  with warnings.catch_warnings():
    # gym 0.25 warns about its own step API on every make().
    warnings.simplefilter('ignore')
    gym_env = gym.make(name, **kwargs)
    gym_env.reset(seed=int(seed))
  gym_env.action_space.seed(int(seed))
  return wrappers.GymWrapper(gym_env)


def make_gymnasium(name: str, seed: int, max_episode_steps: int):
  import gymnasium
  kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
  cls = user.gymnasium_class(name) if ':' in name else None
  if cls is not None:
    environment = cls()
    if max_episode_steps:
      environment = gymnasium.wrappers.TimeLimit(environment, max_episode_steps)
    return GymnasiumEnvironment(environment, seed)
  return GymnasiumEnvironment(gymnasium.make(name, **kwargs), seed)


def dmc_suite():
  # Physics only: no OpenGL context (and no GLFW warning without a display).
  os.environ.setdefault('MUJOCO_GL', 'disable')
  # dm_control logs its renderer choice at INFO on import: not for the user.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.WARNING)
  try:
    from dm_control import suite
  finally:
    logging.set_verbosity(verbosity)
  return suite


def make_dmc(name: str, seed: int, max_episode_steps: int):
  domain, task = dmc_domain_task(name)
  environment = dmc_suite().load(domain, task, task_kwargs={'random': int(seed)})
  # The suite's observations are a dict of arrays: one vector for the agents.
  environment = wrappers.ConcatObservationWrapper(environment)
  if max_episode_steps:
    # Its own time limit still applies; an earlier one ends with discount 1.
    environment = wrappers.StepLimitWrapper(environment, max_episode_steps)
  return environment


def _space_spec(space, name: str):
  """A gymnasium Box or Discrete space as the dm_env spec Acme would build."""
  import gymnasium
  if isinstance(space, gymnasium.spaces.Discrete):
    return specs.DiscreteArray(int(space.n), name=name)
  if isinstance(space, gymnasium.spaces.Box):
    return specs.BoundedArray(space.shape, space.dtype, space.low, space.high,
                              name=name)
  raise ValueError(f'unsupported gymnasium space {space}')


class GymnasiumEnvironment(dm_env.Environment):
  """A Gymnasium 1.x environment as dm_env (Acme 0.4's GymWrapper speaks gym's
  old 4-tuple API).

  `terminated` ends an episode with discount 0; `truncated` (the time limit)
  ends it with discount 1, so value targets still bootstrap from it.
  """

  def __init__(self, environment, seed: int):
    self._environment = environment
    self._seed: Optional[int] = int(seed)  # Used by the first reset only.
    environment.action_space.seed(int(seed))
    self._observation_spec = _space_spec(environment.observation_space,
                                         'observation')
    self._action_spec = _space_spec(environment.action_space, 'action')

  def reset(self) -> dm_env.TimeStep:
    observation, _ = self._environment.reset(seed=self._seed)
    self._seed = None  # Later episodes continue the seeded stream.
    return dm_env.restart(observation)

  def step(self, action) -> dm_env.TimeStep:
    observation, reward, terminated, truncated, _ = self._environment.step(
        action)
    if terminated:
      return dm_env.termination(reward, observation)
    if truncated:
      return dm_env.truncation(reward, observation)
    return dm_env.transition(reward, observation)

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def close(self) -> None:
    self._environment.close()
