"""A task whose observations are a dict of two arrays, as a user's factory
(`config.env_name='tests.use.dict_env:make'`): what the export refuses in
one line (tests/use/test_export.py)."""

import dm_env
from dm_env import specs
import numpy as np


class DictObservations(dm_env.Environment):
  """Ten steps; observations {'position': (3,), 'velocity': (2,)}."""

  def __init__(self, seed: int):
    self._rng = np.random.RandomState(seed)
    self._steps = 0

  def _observation(self):
    return {'position': self._rng.randn(3).astype(np.float32),
            'velocity': self._rng.randn(2).astype(np.float32)}

  def reset(self):
    self._steps = 0
    return dm_env.restart(self._observation())

  def step(self, action):
    self._steps += 1
    if self._steps == 10:
      return dm_env.truncation(0.0, self._observation())
    return dm_env.transition(0.0, self._observation())

  def observation_spec(self):
    return {'position': specs.Array((3,), np.float32, 'position'),
            'velocity': specs.Array((2,), np.float32, 'velocity')}

  def action_spec(self):
    return specs.BoundedArray((6,), np.float32, -1.0, 1.0, 'action')


def make(seed: int) -> dm_env.Environment:
  return DictObservations(seed)
