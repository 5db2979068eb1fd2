"""Cue corridor: a small partially observable task, written from scratch.

At the first step the agent sees a cue, left or right. It then walks a
corridor of `length` steps where the cue is no longer shown; at the end it
picks a door: +1 for the cued door, -1 for the other, and the episode ends.
A policy without memory can only guess at the end (expected return 0); one
that remembers the cue gets +1 every episode. Observations are 4 floats:
cue left, cue right (both 0 after the first step), position along the
corridor in [0, 1], and 1 at the door.
"""

import dm_env
from dm_env import specs
import numpy as np


class CueCorridor(dm_env.Environment):
  """See the module docstring. Actions: 0 = left door, 1 = right door
  (either one walks on inside the corridor)."""

  def __init__(self, seed: int, length: int = 5):
    if length < 1:
      raise ValueError(f'length must be at least 1, not {length}')
    self._rng = np.random.default_rng(seed)
    self._length = length
    self._cue = 0
    self._position = 0

  def reset(self) -> dm_env.TimeStep:
    self._cue = int(self._rng.integers(2))
    self._position = 0
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._position < self._length:
      self._position += 1
      return dm_env.transition(0.0, self._observation())
    reward = 1.0 if int(action) == self._cue else -1.0
    return dm_env.termination(reward, self._observation())

  def _observation(self) -> np.ndarray:
    observation = np.zeros(4, np.float32)
    if self._position == 0:
      observation[self._cue] = 1.0
    observation[2] = self._position / self._length
    observation[3] = float(self._position == self._length)
    return observation

  def observation_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((4,), np.float32, 0.0, 1.0, 'observation')

  def action_spec(self) -> specs.DiscreteArray:
    return specs.DiscreteArray(2, name='action')


def make_env(seed: int, config=None) -> dm_env.Environment:
  """The factory acme-launch calls, once per environment, with that
  environment's own seed (and the run's config, since it asks for it)."""
  length = config.get('corridor_length', 5) if config is not None else 5
  return CueCorridor(seed, length)
