"""Environment factories: tasks of three families on two backends, as dm_env.

A task is named `FAMILY:NAME`, the family prefix optional for gym:

  family      example                   library
  gym         HalfCheetah-v4            gym 0.25 (v4 tasks, as published results;
                                        gym's MODULE:ID form too)
  gymnasium   gymnasium:HalfCheetah-v5  Gymnasium 1.x (v5 tasks), our adapter
  dmc         dmc:walker-walk           dm_control suite, Acme's wrappers

`env_backend` says what steps them:

  gym      one Python environment object per environment, from the family's
           own library (the default; every family)
  envpool  one EnvPool instance steps all N environments of an actor in C++
           (the gym family tasks EnvPool ships: the MuJoCo v4 tasks,
           CartPole-v1, ...; and its dm_control suite tasks, dmc:walker-walk
           as EnvPool's WalkerWalk-v1)

Whatever the family and backend, an agent sees the same thing: single
precision, continuous actions in [-1, 1] (rescaled to the task's bounds and
clipped), discount 0 only on a true termination (a time limit keeps
discount 1).
"""

import dataclasses
import importlib
import importlib.util
import os
from typing import Any, List, NamedTuple, Optional, Sequence

from absl import logging
from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
from acme import specs
from acme import wrappers
import dm_env
import numpy as np

from acme_launch import errors
from acme_launch.envs import user

FAMILIES = ('gym', 'gymnasium', 'dmc')
USER = 'user'  # MODULE:FACTORY, the user's own (envs/user.py).
BACKENDS = ('gym', 'envpool')
_STEP_TYPES = tuple(dm_env.StepType)  # By value: FIRST, MID, LAST.
# The Python package each backend needs beyond the gym family's own.
_BACKEND_PACKAGES = {'envpool': 'envpool'}
_FAMILY_PACKAGES = {'gym': 'gym', 'gymnasium': 'gymnasium',
                    'dmc': 'dm_control'}


@dataclasses.dataclass(frozen=True)
class Task:
  family: str  # One of FAMILIES.
  name: str    # The family's own id: 'HalfCheetah-v5', 'walker-walk'.


def parse_task(env_name: str) -> Task:
  """'gymnasium:HalfCheetah-v5' -> Task('gymnasium', 'HalfCheetah-v5')."""
  family, sep, name = env_name.partition(':')
  if not sep:
    return Task('gym', env_name)
  if family not in FAMILIES and _is_module(family):
    if name.isidentifier() and (_has_attr(family, name) or
                                not _gym_registered(name)):
      return Task(USER, env_name)  # A factory of the user's (envs/user.py).
    return Task('gym', env_name)  # gym's own MODULE:ID form.
  if family not in FAMILIES or not name:
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: unknown task family {family!r}; '
        f'name a task as TASK (gym), gymnasium:TASK or dmc:DOMAIN-TASK')
  return Task(family, name)


def _has_attr(module: str, name: str) -> bool:
  try:
    return hasattr(importlib.import_module(module), name)
  except Exception:  # pylint: disable=broad-except
    return False  # check_task reports the import error.


def _gym_registered(name: str) -> bool:
  import gym  # pylint: disable=g-import-not-at-top
  return name in gym.envs.registry


def _is_module(name: str) -> bool:
  try:
    return importlib.util.find_spec(name) is not None
  except (ImportError, ValueError):
    return False


def _dmc_domain_task(name: str):
  domain, _, task = name.partition('-')
  return domain, task.replace('-', '_')


def _family_tasks(family: str) -> List[str]:
  """Every task name a family's library registers, for error messages."""
  if family == 'gym':
    import gym  # pylint: disable=g-import-not-at-top
    return sorted(gym.envs.registry.keys())
  if family == 'gymnasium':
    import gymnasium  # pylint: disable=g-import-not-at-top
    return sorted(gymnasium.registry.keys())
  return [f'{d}-{t.replace("_", "-")}' for d, t in _dmc_suite().ALL_TASKS]


def _envpool_tasks() -> List[str]:
  import envpool  # pylint: disable=g-import-not-at-top
  return envpool.list_all_envs()


def _envpool_id(task: Task) -> str:
  """EnvPool's name for a task ('' where it has none): gym ids as they are,
  dm_control's `walker-walk` as `WalkerWalk-v1`."""
  if task.family == 'gym':
    name = task.name
  elif task.family == 'dmc':
    domain, task_name = _dmc_domain_task(task.name)
    name = ''.join(part[:1].upper() + part[1:]
                   for part in f'{domain}_{task_name}'.split('_')) + '-v1'
  else:
    return ''
  return name if name in _envpool_tasks() else ''


def check_task(env_name: str, backend: str) -> Task:
  """The task, or LaunchError (one line naming the choices) before launch."""
  if backend not in BACKENDS:
    raise errors.LaunchError(
        f'config.env_backend {backend!r} is unknown; choose one of: '
        f'{", ".join(BACKENDS)}')
  task = parse_task(env_name)
  if task.family == USER:
    if backend == 'envpool':
      raise errors.LaunchError(
          f'config.env_backend envpool runs EnvPool\'s own tasks, not '
          f'{env_name!r}: use config.env_backend=gym for a factory of yours')
    user.factory(env_name)
    return task
  for package in (_FAMILY_PACKAGES[task.family],
                  _BACKEND_PACKAGES.get(backend)):
    if not package:
      continue
    try:
      importlib.import_module(package)
    except ImportError as e:  # Missing, or a library it links is missing.
      raise errors.LaunchError(
          f'{package} cannot be imported ({" ".join(str(e).split())[:200]}); '
          f'it runs {env_name!r} on the {backend} backend: run '
          'scripts/setup.sh, which installs the lock, or choose '
          f'config.env_backend from: {", ".join(BACKENDS)}') from None
  name = task.name
  if task.family == 'gymnasium' and ':' in name:
    # Gymnasium's MODULE:ID, or MODULE:CLASS of the user's (envs/user.py).
    if user.gymnasium_class(name) is not None:
      if backend == 'envpool':
        raise errors.LaunchError(
            f'config.env_backend envpool runs EnvPool\'s own tasks, not '
            f'{env_name!r}: use config.env_backend=gym')
      return task
    name = user.split(name)[1]
  if task.family == 'gym' and ':' in name:
    # gym's MODULE:ID: importing the module registers ID, as gym.make does.
    module, _, name = name.partition(':')
    try:
      importlib.import_module(module)
    except Exception as e:  # pylint: disable=broad-except
      raise errors.LaunchError(
          f'config.env_name {env_name!r}: importing {module} failed: '
          f'{type(e).__name__}: {" ".join(str(e).split())[:200]}') from None
  known = _family_tasks(task.family)
  if name not in known:
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: unknown {task.family} task; known: '
        f'{", ".join(known)}')
  if backend == 'envpool' and not _envpool_id(task):
    gym_tasks = [t for t in _envpool_tasks() if t in _family_tasks('gym')]
    dmc_tasks = [t for t in _family_tasks('dmc')
                 if _envpool_id(Task('dmc', t))]
    raise errors.LaunchError(
        f'config.env_backend envpool does not run {env_name!r}; it runs '
        f'these gym tasks: {", ".join(sorted(gym_tasks))}; and these dmc '
        f'tasks: {", ".join(f"dmc:{t}" for t in dmc_tasks)} (other tasks: '
        'config.env_backend=gym)')
  return task


def make_environment(env_name: str, seed: int, max_episode_steps: int = 0,
                     backend: str = 'gym', config=None) -> dm_env.Environment:
  """One environment of the task, wrapped for Acme, seeded once.

  Evaluators and single-environment actors use this; `max_episode_steps`
  0 keeps the task's own limit. `config` goes to a user's factory that asks
  for it.
  """
  if backend == 'envpool':
    return EnvPoolEnvironment(
        EnvPoolEnvironments(env_name, 1, seed, max_episode_steps))
  task = parse_task(env_name)
  if task.family == 'gym':
    environment = _make_gym(task.name, seed, max_episode_steps)
  elif task.family == 'gymnasium':
    environment = _make_gymnasium(task.name, seed, max_episode_steps)
  elif task.family == USER:
    environment = user.make(env_name, seed, config)
    if max_episode_steps:
      environment = wrappers.StepLimitWrapper(environment, max_episode_steps)
  else:
    environment = _make_dmc(task.name, seed, max_episode_steps)
  if isinstance(environment.action_spec(), specs.BoundedArray) and not (
      isinstance(environment.action_spec(), specs.DiscreteArray)):
    environment = wrappers.CanonicalSpecWrapper(environment, clip=True)
  return wrappers.SinglePrecisionWrapper(environment)


def _make_gym(name: str, seed: int, max_episode_steps: int):
  import warnings  # pylint: disable=g-import-not-at-top
  import gym  # pylint: disable=g-import-not-at-top
  kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
  with warnings.catch_warnings():
    # gym 0.25 warns about its own step API on every make().
    warnings.simplefilter('ignore')
    gym_env = gym.make(name, **kwargs)
    gym_env.reset(seed=int(seed))
  gym_env.action_space.seed(int(seed))
  return wrappers.GymWrapper(gym_env)


def _make_gymnasium(name: str, seed: int, max_episode_steps: int):
  import gymnasium  # pylint: disable=g-import-not-at-top
  kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
  cls = user.gymnasium_class(name) if ':' in name else None
  if cls is not None:
    environment = cls()
    if max_episode_steps:
      environment = gymnasium.wrappers.TimeLimit(environment, max_episode_steps)
    return GymnasiumEnvironment(environment, seed)
  return GymnasiumEnvironment(gymnasium.make(name, **kwargs), seed)


def _dmc_suite():
  # Physics only: no OpenGL context (and no GLFW warning without a display).
  os.environ.setdefault('MUJOCO_GL', 'disable')
  # dm_control logs its renderer choice at INFO on import: not for the user.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.WARNING)
  try:
    from dm_control import suite  # pylint: disable=g-import-not-at-top
  finally:
    logging.set_verbosity(verbosity)
  return suite


def _make_dmc(name: str, seed: int, max_episode_steps: int):
  domain, task = _dmc_domain_task(name)
  environment = _dmc_suite().load(domain, task, task_kwargs={'random': int(seed)})
  # The suite's observations are a dict of arrays: one vector for the agents.
  environment = wrappers.ConcatObservationWrapper(environment)
  if max_episode_steps:
    # Its own time limit still applies; an earlier one ends with discount 1.
    environment = wrappers.StepLimitWrapper(environment, max_episode_steps)
  return environment


def _space_spec(space, name: str):
  """A gymnasium Box or Discrete space as the dm_env spec Acme would build."""
  import gymnasium  # pylint: disable=g-import-not-at-top
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


_FIRST, _MID, _LAST = (int(t) for t in _STEP_TYPES)


class TimeSteps(NamedTuple):
  """One step of several environments, as arrays with a leading env axis.

  Row k is environment `env_id[k]`'s timestep. A FIRST row has reward 0
  and discount 1 (dm_env's restart has None there). What the batch
  environments below return and the batched actor, policy and writers take:
  no per-environment TimeStep objects on the way.
  """
  step_type: np.ndarray   # [B] int8, dm_env.StepType values
  reward: np.ndarray      # [B] float32
  discount: np.ndarray    # [B] float32
  observation: Any        # [B, ...] float32
  env_id: np.ndarray      # [B] int64, which environments these rows are

  def first(self) -> np.ndarray:
    return self.step_type == _FIRST

  def last(self) -> np.ndarray:
    return self.step_type == _LAST

  def take(self, rows: np.ndarray) -> 'TimeSteps':
    """These rows only (a boolean mask or row positions)."""
    return TimeSteps(self.step_type[rows], self.reward[rows],
                     self.discount[rows], self.observation[rows],
                     self.env_id[rows])

  def timestep(self, row: int) -> dm_env.TimeStep:
    """Row `row` as a dm_env.TimeStep (a view of the arrays), for Acme's
    own per-environment adders."""
    step_type = _STEP_TYPES[self.step_type[row]]
    if step_type == dm_env.StepType.FIRST:
      return dm_env.TimeStep(step_type, None, None, self.observation[row])
    return dm_env.TimeStep(step_type, self.reward[row], self.discount[row],
                           self.observation[row])

  @staticmethod
  def stack(timesteps: Sequence[dm_env.TimeStep],
            env_id: Optional[np.ndarray] = None) -> 'TimeSteps':
    """dm_env TimeSteps (environments 0..N-1, or `env_id`) as one batch."""
    first = [t.first() for t in timesteps]
    return TimeSteps(
        np.array([int(t.step_type) for t in timesteps], np.int8),
        np.array([0.0 if f else t.reward
                  for t, f in zip(timesteps, first)], np.float32),
        np.array([1.0 if f else t.discount
                  for t, f in zip(timesteps, first)], np.float32),
        np.stack([t.observation for t in timesteps]),
        np.arange(len(timesteps)) if env_id is None else np.asarray(env_id))


class PythonEnvironments:
  """N environments of the gym backend, stepped one after another.

  `step` returns their timesteps stacked once into `TimeSteps`. An ended
  environment is not restarted by the next step: the loop restarts it at
  once with `reset_some`.
  """

  auto_reset = False

  def __init__(self, environments: Sequence[dm_env.Environment]):
    self._environments = list(environments)
    self._actions = None

  @property
  def num_envs(self) -> int:
    return len(self._environments)

  def reset(self) -> TimeSteps:
    return TimeSteps.stack([e.reset() for e in self._environments])

  def reset_some(self, env_ids: np.ndarray) -> TimeSteps:
    return TimeSteps.stack([self._environments[i].reset() for i in env_ids],
                           env_ids)

  def reset_one(self, index: int) -> dm_env.TimeStep:
    return self._environments[index].reset()

  def step(self, actions: np.ndarray) -> TimeSteps:
    return TimeSteps.stack([environment.step(action) for environment, action
                            in zip(self._environments, actions)])

  # The batched actor's interface: an action batch sent, the next timesteps
  # received. Here the environments step in `recv`, one after another.
  def send(self, actions: np.ndarray, env_id: np.ndarray) -> None:
    del env_id  # Always all of them, in order.
    self._actions = actions

  def recv(self) -> TimeSteps:
    return self.step(self._actions)


class EnvPoolEnvironments:
  """Environments of a task in one EnvPool instance (dm_env API), as arrays.

  EnvPool resets an ended environment on the step after its last one (that
  step's action is ignored and it returns the new episode's first
  timestep), so `auto_reset` is True: the actor loop handles a first timestep
  coming out of `step`. EnvPool's dm_env API gives discount 0 at the time
  limit too; this counts each environment's steps and gives discount 1 to an
  episode ended there (a termination on exactly that step reads as the time
  limit). EnvPool seeds environment i with `seed + i`. A dm_control task's
  observation fields are concatenated in sorted order, as Acme's
  ConcatObservationWrapper does on the gym backend.

  `batch_size` below `num_envs` is EnvPool's async mode: `send` hands
  actions for the environments of the last batch and returns at once, `recv`
  returns the next `batch_size` environments that finished a step, whichever
  they are (`TimeSteps.env_id`), so EnvPool's threads step some environments
  while the policy acts for others. 0: sync (every step is all of them).
  """

  auto_reset = True

  def __init__(self, env_name: str, num_envs: int, seed: int,
               max_episode_steps: int = 0, num_threads: int = 1,
               batch_size: int = 0):
    import envpool  # pylint: disable=g-import-not-at-top
    kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
    task = parse_task(env_name)
    self._batch_size = int(batch_size) or num_envs
    if not 0 < self._batch_size <= num_envs:
      raise ValueError(f'batch_size {batch_size} not in [1, {num_envs}]')
    self._pool = envpool.make_dm(
        _envpool_id(task), num_envs=num_envs, batch_size=self._batch_size,
        seed=int(seed), num_threads=max(1, int(num_threads)), **kwargs)
    self._num_envs = num_envs
    self._env_ids = np.arange(num_envs, dtype=np.int32)
    self._limit = int(self._pool.spec.config.max_episode_steps)
    self._elapsed = np.zeros(num_envs, np.int64)
    self._pending = 0  # Environments sent actions and not yet received.
    observation_spec = self._pool.observation_spec()
    if task.family == 'dmc':
      # One vector, as the gym backend's ConcatObservationWrapper makes it.
      self._fields = sorted(f for f in observation_spec._fields
                            if f not in ('env_id', 'players'))
      size = sum(int(np.prod(getattr(observation_spec, f).shape))
                 for f in self._fields)
      self._observation_spec = specs.BoundedArray(
          (size,), np.float32, -np.inf, np.inf, name='state')
    else:
      self._fields = None
      obs = observation_spec.obs
      self._observation_spec = specs.BoundedArray(
          obs.shape, np.float32,
          np.broadcast_to(obs.minimum, obs.shape).astype(np.float32),
          np.broadcast_to(obs.maximum, obs.shape).astype(np.float32),
          name='observation')
    action = self._pool.action_spec()
    if isinstance(action, specs.DiscreteArray):
      self._action_spec = specs.DiscreteArray(action.num_values, name='action')
      self._low = self._high = None
    else:
      self._action_spec = specs.BoundedArray(
          action.shape, np.float32, -np.ones(action.shape, np.float32),
          np.ones(action.shape, np.float32),
          name=None if task.family == 'dmc' else 'action')
      self._low = np.broadcast_to(action.minimum, action.shape)
      self._high = np.broadcast_to(action.maximum, action.shape)
      self._half_range = 0.5 * (self._high - self._low)

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def batch_size(self) -> int:
    return self._batch_size

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reset(self) -> TimeSteps:
    """Sync: every environment's first timestep. Async: every environment
    restarts; the first batch to finish comes back (the others come out of
    later `recv` calls, as first timesteps)."""
    while self._pending:  # Steps sent and never received: finish them.
      self.recv()
    self._elapsed[:] = 0
    if self._batch_size == self._num_envs:
      return self._arrays(self._pool.reset())
    self._pool.async_reset()
    self._pending = self._num_envs
    return self.recv()

  def send(self, actions: np.ndarray, env_id: np.ndarray) -> None:
    """Actions for environments `env_id` (a batch `recv` returned)."""
    self._pool.send(self._scale(actions), env_id)
    self._pending += len(env_id)

  def recv(self) -> TimeSteps:
    self._pending -= self._batch_size
    return self._arrays(self._pool.recv())

  def step(self, actions: np.ndarray) -> TimeSteps:
    """Sync mode: one step of every environment."""
    return self._arrays(self._pool.step(self._scale(actions), self._env_ids))

  def _scale(self, actions: np.ndarray) -> np.ndarray:
    actions = np.asarray(actions)
    if self._low is not None:  # [-1, 1] -> the task's bounds, as the gym path.
      actions = self._low + (np.clip(actions, -1.0, 1.0) + 1.0) * (
          self._half_range)
    return actions

  def _arrays(self, batch) -> TimeSteps:
    """EnvPool's batch as it is, but float32 and discount 1 at time limits."""
    step_types = np.asarray(batch.step_type).astype(np.int8)
    env_id = np.asarray(batch.observation.env_id, np.int64)
    elapsed = np.where(step_types == _FIRST, 0, self._elapsed[env_id] + 1)
    self._elapsed[env_id] = elapsed
    discounts = np.asarray(batch.discount, np.float32)
    truncated = (step_types == _LAST) & (elapsed >= self._limit)
    if truncated.any():
      discounts = np.where(truncated, np.float32(1.0), discounts)
    return TimeSteps(step_types, np.asarray(batch.reward, np.float32),
                     discounts, self._observations(batch.observation),
                     env_id)

  def _observations(self, observation) -> np.ndarray:
    if self._fields is None:
      return np.asarray(observation.obs, np.float32)
    return np.concatenate(
        [np.asarray(getattr(observation, f), np.float32).reshape(
            len(observation.env_id), -1) for f in self._fields], axis=1)

  def close(self) -> None:
    self._pool.close()


class EnvPoolEnvironment(dm_env.Environment):
  """A one-environment EnvPool as a plain dm_env (evaluators, 1-env actors)."""

  def __init__(self, pool: EnvPoolEnvironments):
    self._pool = pool

  def reset(self) -> dm_env.TimeStep:
    return self._pool.reset().timestep(0)

  def step(self, action) -> dm_env.TimeStep:
    return self._pool.step(np.asarray(action)[None]).timestep(0)

  def observation_spec(self):
    return self._pool.observation_spec()

  def action_spec(self):
    return self._pool.action_spec()

  def reward_spec(self):
    return specs.Array((), np.float32, 'reward')

  def discount_spec(self):
    return specs.BoundedArray((), np.float32, 0.0, 1.0, 'discount')

  def close(self) -> None:
    self._pool.close()


def make_environments(env_name: str, seeds: Sequence[int],
                      max_episode_steps: int = 0, backend: str = 'gym',
                      num_threads: int = 1, async_envs: int = 0,
                      config=None):
  """The N environments of one actor, on the backend (PythonEnvironments or
  EnvPoolEnvironments): `seeds[0]` is the actor's seed.

  The gym backend seeds environment j with seeds[j]; EnvPool takes one seed
  and seeds its environment i with seeds[0] + i. `async_envs` above
  len(seeds): EnvPool's async mode, that many environments of which each
  step receives len(seeds).
  """
  if backend == 'envpool':
    if async_envs > len(seeds):
      return EnvPoolEnvironments(env_name, async_envs, seeds[0],
                                 max_episode_steps, num_threads,
                                 batch_size=len(seeds))
    return EnvPoolEnvironments(env_name, len(seeds), seeds[0],
                               max_episode_steps, num_threads)
  return PythonEnvironments([make_environment(env_name, seed, max_episode_steps,
                                              config=config)
                             for seed in seeds])


def node_seed(base_seed: int, group: str, index: int) -> int:
  """A per-node seed: a pure function of the config seed and the node.

  The same config and seed give every actor and evaluator the same seed on
  every run; different nodes get unrelated streams.
  """
  group_code = sum(ord(c) * 31**i for i, c in enumerate(group)) % 2**31
  sequence = np.random.SeedSequence([int(base_seed), group_code, int(index)])
  return int(sequence.generate_state(1)[0] % 2**31)
