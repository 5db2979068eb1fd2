"""PPO's reward normalization: rewards divided by the spread of returns.

Each environment keeps its discounted return so far, R <- discount * R + r
(zero again after an episode's last step). A running variance of those R
values, over every step of every environment the actor steps, sets the
scale: the reward written to replay is r / sqrt(var + eps), clipped to
+-`clip`. This is what gym's `NormalizeReward` wrapper does and what
CleanRL's and Stable-Baselines3's MuJoCo PPO use: value targets stay near
unit size whatever the task's reward scale, so the value loss does not
swamp the policy's share of the clipped global gradient norm.

Only the rewards written to replay are scaled: the actor's logged episode
returns and the evaluator see the environment's own rewards. The statistics
live in the actor process (each actor its own; they converge to the same
scale) and start again when an actor restarts or a run resumes.
"""

from typing import Sequence

from acme_launch import compat  # JAX aliases; before acme
from acme import adders as adders_lib
import dm_env
import numpy as np


class ReturnScaler:
  """Running scale of N environments' discounted returns."""

  def __init__(self, num_envs: int, discount: float, clip: float = 10.0,
               epsilon: float = 1e-8):
    self._discount = discount
    self._clip = clip
    self._epsilon = epsilon
    self._returns = np.zeros(num_envs, np.float64)
    # Running mean and variance of the returns (parallel Welford updates),
    # started as gym's RunningMeanStd is: a tiny count of a unit variance.
    self._count = 1e-4
    self._mean = 0.0
    self._var = 1.0

  @property
  def std(self) -> float:
    return float(np.sqrt(self._var + self._epsilon))

  def scale(self, index: np.ndarray, rewards: Sequence[float],
            lasts: Sequence[bool]) -> np.ndarray:
    """The scaled rewards of environments `index` after one step each."""
    rewards = np.asarray(rewards, np.float64)
    returns = self._returns[index] * self._discount + rewards
    self._update(returns)
    self._returns[index] = np.where(np.asarray(lasts, bool), 0.0, returns)
    return np.clip(rewards / self.std, -self._clip, self._clip)

  def _update(self, values: np.ndarray) -> None:
    count = values.size
    if not count:
      return
    delta = values.mean() - self._mean
    total = self._count + count
    self._mean += delta * count / total
    self._var = (self._var * self._count + values.var() * count +
                 delta**2 * self._count * count / total) / total
    self._count = total


class RewardScalingAdder(adders_lib.Adder):
  """One environment's Acme adder, fed scaled rewards."""

  def __init__(self, adder: adders_lib.Adder, scaler: ReturnScaler):
    self._adder = adder
    self._scaler = scaler
    self._index = np.zeros(1, np.int64)

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    self._adder.add_first(timestep)

  def add(self, action, next_timestep: dm_env.TimeStep, extras=()) -> None:
    reward = self._scaler.scale(self._index, [next_timestep.reward],
                                [next_timestep.last()])[0]
    reward = np.asarray(reward, np.asarray(next_timestep.reward).dtype)
    self._adder.add(action, next_timestep._replace(reward=reward), extras)

  def reset(self) -> None:
    self._adder.reset()
