"""Writing the experience of N lockstep environments to Reverb.

`BatchedEnvironmentLoop` hands each step of its N environments to one of
these at once. Two kinds:

* `PerEnvAdders`: one of the agent's own Acme adders per environment, called
  in turn. Works for every agent; each trajectory is written exactly as a
  separate actor's would be.
* `BatchedSequenceAdder`: PPO's sequences (Acme's `SequenceAdder` with
  period = sequence_length - 1, continuing across episodes) built in numpy
  buffers for all N environments at once, and written as one Reverb append
  and one item per finished sequence. Acme's adder makes two Reverb appends
  per env step; profiled in a 32-env actor that was about a quarter of its
  time. The items are the same: `tests/test_batched_adders.py` feeds both the
  same steps and compares every item.
"""

from typing import Optional, Sequence

from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
from acme import adders as adders_lib
from acme import types
from acme.adders.reverb import base as reverb_base
import dm_env
import numpy as np
import reverb
import tree

from acme_launch.program import reward_scaling


class PerEnvAdders:
  """The agent's own adders, one per environment."""

  def __init__(self, adders: Sequence[adders_lib.Adder]):
    self._adders = list(adders)

  def add_first(self, index: int, timestep: dm_env.TimeStep) -> None:
    self._adders[index].add_first(timestep)

  def add(self, actions: np.ndarray, timesteps: Sequence[dm_env.TimeStep],
          extras: Optional[types.NestedArray] = None,
          active: Optional[np.ndarray] = None) -> None:
    """`active[i]` False: environment i did not step (EnvPool reset it)."""
    for i, (adder, timestep) in enumerate(zip(self._adders, timesteps)):
      if active is not None and not active[i]:
        continue
      if extras is None:
        adder.add(actions[i], timestep)
      else:
        adder.add(actions[i], timestep,
                  extras=tree.map_structure(lambda x, i=i: x[i], extras))


class BatchedSequenceAdder:
  """Acme's continuing SequenceAdder for N environments, written in bulk.

  Each environment's stream of rows is what Acme's adder builds: one row per
  step (the observation acted on, whether it started an episode, the action,
  the reward and discount that followed, extras), plus at each episode end a
  row holding the final observation with zero action, reward, discount and
  extras. Items are windows of `sequence_length` rows every
  `sequence_length - 1` rows, running on across episode boundaries.
  """

  def __init__(self, client: reverb.Client, table: str,
               signature: reverb_base.Trajectory, num_envs: int,
               max_in_flight_items: Optional[int] = None,
               reward_scaler: Optional[reward_scaling.ReturnScaler] = None,
               final_rows: bool = True):
    """`signature` is the table's: Acme's `SequenceAdder.signature(...)`.

    With `reward_scaler`, rows hold its scaled rewards (PPO's reward
    normalization) instead of the environments' own. With `final_rows`
    False, an episode's end writes no final-observation row: its last step's
    row gets discount 0 (a time limit too) and the next episode's first row
    follows it (see `final_observation_rows` in agents/ppo.py).
    """
    self._table = table
    self._reward_scaler = reward_scaler
    self._final_rows = final_rows
    self._num_envs = num_envs
    self._max_in_flight_items = max_in_flight_items or num_envs
    self._sequence_length = int(signature.start_of_episode.shape[0])
    self._has_extras = bool(tree.flatten(signature.extras))
    # One buffer per field: [num_envs, sequence_length, *field shape].
    self._buffers = tree.map_structure(
        lambda spec: np.zeros((num_envs, *spec.shape),
                              spec.dtype.as_numpy_dtype), signature)
    self._fill = np.zeros(num_envs, np.int64)
    self._env_index = np.arange(num_envs)
    # Observation (and start flag) of the row each environment has open.
    self._open_observation = tree.map_structure(
        lambda spec: np.zeros((num_envs, *spec.shape[1:]),
                              spec.dtype.as_numpy_dtype),
        signature.observation)
    self._open_start = np.zeros(num_envs, bool)
    self._opened = np.zeros(num_envs, bool)
    # One writer for all N streams: every item is a single appended step.
    self._writer = client.trajectory_writer(num_keep_alive_refs=1)

  def add_first(self, index: int, timestep: dm_env.TimeStep) -> None:
    if not timestep.first():
      raise ValueError('add_first needs a first timestep.')
    tree.map_structure(lambda buf, x: buf.__setitem__(index, x),
                       self._open_observation, timestep.observation)
    self._open_start[index] = True
    self._opened[index] = True

  def add(self, actions: np.ndarray, timesteps: Sequence[dm_env.TimeStep],
          extras: Optional[types.NestedArray] = None,
          active: Optional[np.ndarray] = None) -> None:
    """One step of every environment: `timesteps[i]` followed `actions[i]`.

    With `active`, only environments i with `active[i]` stepped (EnvPool
    resets an ended environment on the next step instead of stepping it).
    """
    if active is None:
      index = self._env_index
      pick = lambda x: x
    else:
      index = np.flatnonzero(active)
      pick = lambda x: np.asarray(x)[index]
      timesteps = [timesteps[i] for i in index]
      if not index.size:
        return
    if not self._opened[index].all():
      raise ValueError('add_first must be called for every environment first.')
    rows = index, self._fill[index]
    buffers = self._buffers
    tree.map_structure(lambda buf, x: buf.__setitem__(rows, pick(x)),
                       buffers.observation, self._open_observation)
    buffers.start_of_episode[rows] = self._open_start[index]
    tree.map_structure(lambda buf, x: buf.__setitem__(rows, pick(x)),
                       buffers.action, actions)
    rewards = [t.reward for t in timesteps]
    if self._reward_scaler is not None:
      rewards = self._reward_scaler.scale(index, rewards,
                                          [t.last() for t in timesteps])
    buffers.reward[rows] = rewards
    discounts = [t.discount for t in timesteps]
    if not self._final_rows:  # The episode's last row ends its returns.
      discounts = [0.0 if t.last() else d for t, d in zip(timesteps, discounts)]
    buffers.discount[rows] = discounts
    if self._has_extras:
      tree.map_structure(lambda buf, x: buf.__setitem__(rows, pick(x)),
                         buffers.extras, extras)
    self._fill[index] += 1
    observations = tree.map_structure(
        lambda *xs: np.stack(xs), *[t.observation for t in timesteps])
    tree.map_structure(lambda buf, x: buf.__setitem__(index, x),
                       self._open_observation, observations)
    self._open_start[index] = False
    self._write_full()

    for i, timestep in zip(index, timesteps):
      if timestep.last():
        if self._final_rows:
          self._add_final_row(i)
        self._opened[i] = False

  def _add_final_row(self, i: int) -> None:
    """The episode's last observation, with zeros where an action would be."""
    row = self._fill[i]
    for name, buf in zip(reverb_base.Trajectory._fields, self._buffers):
      if name == 'observation':
        tree.map_structure(lambda b, x: b.__setitem__((i, row), x[i]),
                           buf, self._open_observation)
      else:
        tree.map_structure(lambda b: b.__setitem__((i, row), 0), buf)
    self._fill[i] += 1
    self._write_full()

  def _write_full(self) -> None:
    full = np.flatnonzero(self._fill == self._sequence_length)
    if not full.size:
      return
    for i in full:
      self._writer.append(tree.map_structure(lambda buf: buf[i], self._buffers))
      self._writer.create_item(
          self._table, priority=1.0,
          trajectory=tree.map_structure(lambda column: column[-1],
                                        self._writer.history))
      # The next window starts with this one's last row.
      tree.map_structure(lambda buf: buf.__setitem__(
          (i, 0), buf[i, self._sequence_length - 1]), self._buffers)
    self._fill[full] = 1
    # Blocks while the table is full: actors wait for the learner here.
    self._writer.flush(self._max_in_flight_items)

  def close(self) -> None:
    self._writer.close()

