"""The gym, gymnasium and dmc families: their libraries' tasks, checked
against what each library (and EnvPool) registers, one environment each
(Gymnasium through our dm_env adapter)."""

import importlib
import os
from typing import List, Optional

from absl import logging
from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme import wrappers
import dm_env

from acme_launch import errors
from acme_launch.envs import registry
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
  # dm_control reads MUJOCO_GL once, at import: set for that import only, so
  # that a process started from this one later (a filmed evaluation) still
  # makes its own renderer choice.
  unset = 'MUJOCO_GL' not in os.environ
  if unset:
    os.environ['MUJOCO_GL'] = 'disable'
  # dm_control logs its renderer choice at INFO on import: not for the user.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.WARNING)
  try:
    from dm_control import suite
  finally:
    logging.set_verbosity(verbosity)
    if unset:
      os.environ.pop('MUJOCO_GL', None)
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


def gym_tasks() -> List[str]:
  import gym
  return sorted(gym.envs.registry.keys())


def gymnasium_tasks() -> List[str]:
  import gymnasium
  return sorted(gymnasium.registry.keys())


def dmc_tasks() -> List[str]:
  return [f'{d}-{t.replace("_", "-")}' for d, t in dmc_suite().ALL_TASKS]


def envpool_tasks() -> List[str]:
  import envpool
  return envpool.list_all_envs()


def gym_envpool_id(name: str) -> str:
  """EnvPool's name for a gym task: its own id ('' where EnvPool has none)."""
  return name if name in envpool_tasks() else ''


def dmc_envpool_id(name: str) -> str:
  """EnvPool's name for a dm_control task: `walker-walk` as `WalkerWalk-v1`
  ('' where EnvPool has none)."""
  domain, task_name = dmc_domain_task(name)
  name = ''.join(part[:1].upper() + part[1:]
                 for part in f'{domain}_{task_name}'.split('_')) + '-v1'
  return name if name in envpool_tasks() else ''


def _unknown(env_name: str, family: str, name: str, known: List[str]) -> None:
  if name not in known:
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: unknown {family} task; known: '
        f'{", ".join(known)}')


def _not_on_envpool(env_name: str) -> errors.LaunchError:
  gym_names = [t for t in envpool_tasks() if t in gym_tasks()]
  dmc_names = [t for t in dmc_tasks() if dmc_envpool_id(t)]
  return errors.LaunchError(
      f'config.env_backend envpool does not run {env_name!r}; it runs '
      f'these gym tasks: {", ".join(sorted(gym_names))}; and these dmc '
      f'tasks: {", ".join(f"dmc:{t}" for t in dmc_names)} (other tasks: '
      'config.env_backend=gym)')


def check_gym(name: str, env_name: str, backend: str) -> None:
  task = name
  if ':' in name:
    # gym's MODULE:ID: importing the module registers ID, as gym.make does.
    module, _, task = name.partition(':')
    try:
      importlib.import_module(module)
    except Exception as e:
      raise errors.LaunchError(
          f'config.env_name {env_name!r}: importing {module} failed: '
          f'{type(e).__name__}: {" ".join(str(e).split())[:200]}') from None
  _unknown(env_name, 'gym', task, gym_tasks())
  if backend == 'envpool' and not gym_envpool_id(name):
    raise _not_on_envpool(env_name)


def check_gymnasium(name: str, env_name: str, backend: str) -> None:
  if ':' in name:
    # Gymnasium's MODULE:ID, or MODULE:CLASS of the user's (envs/user.py).
    if user.gymnasium_class(name) is not None:
      if backend == 'envpool':
        raise errors.LaunchError(
            f'config.env_backend envpool runs EnvPool\'s own tasks, not '
            f'{env_name!r}: use config.env_backend=gym')
      return
    name = user.split(name)[1]
  _unknown(env_name, 'gymnasium', name, gymnasium_tasks())
  if backend == 'envpool':  # EnvPool runs gym's ids, none of Gymnasium's.
    raise _not_on_envpool(env_name)


def check_dmc(name: str, env_name: str, backend: str) -> None:
  _unknown(env_name, 'dmc', name, dmc_tasks())
  if backend == 'envpool' and not dmc_envpool_id(name):
    raise _not_on_envpool(env_name)


def _claims_gym(env_name: str) -> bool:
  """TASK, and gym's MODULE:ID where MODULE:FN is no factory of the user's."""
  module, sep, _ = env_name.partition(':')
  return not sep or (user.is_module(module) and not user.claims(env_name))


GYM = registry.register_family(registry.Family(
    'gym', registry.BACKENDS, ('gym',), check_gym, make_gym,
    envpool_id=gym_envpool_id, example='TASK (gym)', claims=_claims_gym))
GYMNASIUM = registry.register_family(registry.Family(
    'gymnasium', registry.BACKENDS, ('gymnasium',), check_gymnasium,
    make_gymnasium, envpool_id=lambda name: '', example='gymnasium:TASK'))
DMC = registry.register_family(registry.Family(
    'dmc', registry.BACKENDS, ('dm_control',), check_dmc, make_dmc,
    envpool_id=dmc_envpool_id, example='dmc:DOMAIN-TASK'))
