"""Environment factories: gym tasks as seeded dm_env environments."""

import warnings

from acme import wrappers
import dm_env
import gym
import numpy as np


def make_environment(env_name: str, seed: int,
                     max_episode_steps: int = 0) -> dm_env.Environment:
  """A gym task (e.g. 'HalfCheetah-v4') wrapped for Acme, seeded once.

  Continuous actions are rescaled to [-1, 1] and clipped (the agents' networks
  do not respect bounds themselves); everything is single precision.
  """
  kwargs = {'max_episode_steps': max_episode_steps} if max_episode_steps else {}
  with warnings.catch_warnings():
    # gym 0.25 warns about its own step API on every make().
    warnings.simplefilter('ignore')
    gym_env = gym.make(env_name, **kwargs)
    gym_env.reset(seed=int(seed))
  gym_env.action_space.seed(int(seed))
  environment = wrappers.GymWrapper(gym_env)
  if isinstance(gym_env.action_space, gym.spaces.Box):
    environment = wrappers.CanonicalSpecWrapper(environment, clip=True)
  return wrappers.SinglePrecisionWrapper(environment)


def node_seed(base_seed: int, group: str, index: int) -> int:
  """A per-node seed: a pure function of the config seed and the node.

  The same config and seed give every actor and evaluator the same seed on
  every run; different nodes get unrelated streams.
  """
  group_code = sum(ord(c) * 31**i for i, c in enumerate(group)) % 2**31
  sequence = np.random.SeedSequence([int(base_seed), group_code, int(index)])
  return int(sequence.generate_state(1)[0] % 2**31)
