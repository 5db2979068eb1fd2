"""The factories callers use: one environment, an actor's N environments,
and each node's seed."""

import inspect
from typing import List, Optional, Sequence, Tuple

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme import wrappers
import dm_env
import numpy as np

from acme_launch.envs import registry
from acme_launch.envs.batched import PythonEnvironments
from acme_launch.envs.envpool_backend import EnvPoolEnvironment, EnvPoolEnvironments


def _import_env_modules(config) -> None:
  """config.env_modules, whose import registers the user's families: in a
  node process, before its first environment is made."""
  if config is not None:
    registry.import_modules(config.get('env_modules', ()))


def make_environment(env_name: str, seed: int, max_episode_steps: int = 0,
                     backend: str = 'gym', config=None,
                     evaluation: bool = False) -> dm_env.Environment:
  """One environment of the task, wrapped for Acme, seeded once.

  Evaluators and single-environment actors use this; `max_episode_steps`
  0 keeps the task's own limit (or the family's). `config` goes to a
  family's maker that asks for it (a user's factory). `evaluation`: the
  evaluators' version of a task where it differs from the actors' (Atari:
  whole games, real scores).
  """
  _import_env_modules(config)
  if backend == 'envpool':
    return EnvPoolEnvironment(
        EnvPoolEnvironments(env_name, 1, seed, max_episode_steps,
                            evaluation=evaluation))
  task = registry.parse_task(env_name)
  family = registry.family(task.family)
  limit = max_episode_steps or family.max_episode_steps
  offered = {'max_episode_steps': limit, 'evaluation': evaluation,
             'config': config}
  try:
    parameters = inspect.signature(family.make).parameters
  except (TypeError, ValueError):  # A builtin or C callable: name, seed.
    parameters = {}
  environment = family.make(task.name, int(seed), **{
      key: value for key, value in offered.items() if key in parameters})
  if limit and 'max_episode_steps' not in parameters:
    environment = wrappers.StepLimitWrapper(environment, limit)
  if not family.wrap:
    return environment
  if isinstance(environment.action_spec(), specs.BoundedArray) and not (
      isinstance(environment.action_spec(), specs.DiscreteArray)):
    environment = wrappers.CanonicalSpecWrapper(environment, clip=True)
  return wrappers.SinglePrecisionWrapper(environment)


def make_environments(env_name: str, seeds: Sequence[int],
                      max_episode_steps: int = 0, backend: str = 'gym',
                      num_threads: int = 1, async_envs: int = 0,
                      config=None, stagger_starts: bool = False):
  """The N environments of one actor, on the backend (PythonEnvironments or
  EnvPoolEnvironments): `seeds[0]` is the actor's seed.

  The gym backend seeds environment j with seeds[j]; EnvPool takes one seed
  and seeds its environment i with seeds[0] + i. `async_envs` above
  len(seeds): EnvPool's async mode, that many environments of which each
  step receives len(seeds); there `stagger_starts` ends each environment's
  first episode at a random step (EnvPoolEnvironments).
  """
  _import_env_modules(config)
  if backend == 'envpool':
    if async_envs > len(seeds):
      return EnvPoolEnvironments(env_name, async_envs, seeds[0],
                                 max_episode_steps, num_threads,
                                 batch_size=len(seeds),
                                 stagger_starts=stagger_starts)
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


def consecutive_seeds(seed: int, group: str, count: int) -> List[int]:
  """`count` consecutive seeds from one drawn from `seed` and `group`
  (node_seed's): EnvPool seeds a pool's environments so, and one pool
  plays them (use/episodes.py). All below 2**31, EnvPool's int."""
  first = node_seed(seed, group, 0) % (2**31 - count)
  return [first + j for j in range(count)]


def task_action_bounds(environment: dm_env.Environment
                       ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
  """(minimum, maximum) of the task's own continuous actions, arrays of the
  action's shape, onto which make_environment's [-1, 1] is clipped and
  rescaled (Acme's CanonicalSpecWrapper, or EnvPool's own); None where
  the task takes the agent's actions as they are (discrete actions, a
  family that is not wrapped)."""
  while environment is not None:
    bounds = getattr(environment, 'task_action_bounds', None)  # EnvPool's.
    if bounds is not None:
      low, high = bounds
    elif isinstance(environment, wrappers.CanonicalSpecWrapper):
      spec = environment.environment.action_spec()
      low, high = spec.minimum, spec.maximum
    else:
      environment = getattr(environment, 'environment', None)
      continue
    shape = environment.action_spec().shape
    return (np.broadcast_to(low, shape).astype(np.float32),
            np.broadcast_to(high, shape).astype(np.float32))
  return None
