"""N environments as one batch: `TimeSteps` arrays, and the gym backend's
PythonEnvironments."""

from typing import Any, NamedTuple, Optional, Sequence

import dm_env
import numpy as np

_STEP_TYPES = tuple(dm_env.StepType)  # By value: FIRST, MID, LAST.
FIRST, MID, LAST = (int(t) for t in _STEP_TYPES)


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
    return self.step_type == FIRST

  def last(self) -> np.ndarray:
    return self.step_type == LAST

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
