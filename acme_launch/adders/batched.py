"""Writing the experience of N environments, as arrays, to Reverb.

`BatchedEnvironmentLoop` hands each step of its environments to one of these
as arrays (`envs.TimeSteps`: rows of step types, rewards, discounts,
observations and the environment ids they belong to). Two kinds:

* `PerEnvAdders`: one of the agent's own Acme adders per environment (the
  off-policy agents' transitions), each called with a dm_env.TimeStep view
  of its row, built only for the rows that step. Each trajectory is written
  exactly as a separate actor's would be.
* `BatchedSequenceAdder`: PPO's sequences (Acme's `SequenceAdder` with
  period = sequence_length - 1, continuing across episodes) built in numpy
  buffers for all environments at once from the step's arrays, and written
  as one Reverb append and one item per finished sequence (Reverb 0.7's
  items reference steps of a writer's columns, not parts of one, so a
  sequence is the smallest unit an item can hold; appending the whole
  window at once is the fewest writer calls that gives Acme's items). Acme's
  adder makes two Reverb appends per env step; profiled in a 32-env actor
  that was about a quarter of its time. The items are the same:
  `tests/adders/test_batched.py` feeds both the same steps and compares
  every item.

Both take `add_first(timesteps)` and `add(actions, timesteps, extras)`
with `timesteps` a `TimeSteps` batch (rows of any environments; `actions`
and `extras` row for row), and, as before, `add_first(index, timestep)` and
`add(actions, [timestep per env], extras, active=mask)` with dm_env objects.
"""

import collections
from typing import Optional, Sequence, Union

from acme_launch import compat  # JAX aliases; before acme
from acme import adders as adders_lib
from acme import types
from acme.adders.reverb import base as reverb_base
import dm_env
import numpy as np
import reverb
import tree

from acme_launch.envs.batched import TimeSteps
from acme_launch.adders import reward_scaling

Steps = Union[TimeSteps, Sequence[dm_env.TimeStep]]


def _as_batch(actions, timesteps: Steps, extras, active):
  """(actions, TimeSteps, extras) of the rows that stepped."""
  if not isinstance(timesteps, TimeSteps):
    timesteps = TimeSteps.stack(timesteps)
  if active is not None:
    rows = np.flatnonzero(active)
    timesteps = timesteps.take(rows)
    actions = tree.map_structure(lambda x: np.asarray(x)[rows], actions)
    if extras is not None:
      extras = tree.map_structure(lambda x: np.asarray(x)[rows], extras)
  return actions, timesteps, extras


def _as_first(index, timestep) -> TimeSteps:
  if isinstance(index, TimeSteps):
    return index
  return TimeSteps.stack([timestep], np.array([index]))


class PerEnvAdders:
  """The agent's own adders, one per environment."""

  def __init__(self, adders: Sequence[adders_lib.Adder]):
    self._adders = list(adders)

  def add_first(self, index, timestep: Optional[dm_env.TimeStep] = None):
    """`add_first(timesteps)`: every row; `add_first(i, timestep)`: env i."""
    if timestep is not None:
      self._adders[index].add_first(timestep)
      return
    for row, env in enumerate(index.env_id):
      self._adders[env].add_first(index.timestep(row))

  def add(self, actions, timesteps: Steps,
          extras: Optional[types.NestedArray] = None,
          active: Optional[np.ndarray] = None) -> None:
    """Row k: `actions[k]` was taken in env `timesteps.env_id[k]`, which
    then gave `timesteps` row k. `active[k]` False: that row is skipped."""
    actions, timesteps, extras = _as_batch(actions, timesteps, extras, active)
    for row, env in enumerate(timesteps.env_id):
      if extras is None:
        self._adders[env].add(actions[row], timesteps.timestep(row))
      else:
        self._adders[env].add(
            actions[row], timesteps.timestep(row),
            extras=tree.map_structure(lambda x, r=row: x[r], extras))


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
    follows it (see `final_observation_rows` in agents/ppo/builder.py).
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
    # The same buffers in the signature's flattened order: what is appended
    # to Reverb (one column per buffer) and what an item references.
    self._flat_buffers = tree.flatten(self._buffers)
    self._fill = np.zeros(num_envs, np.int64)
    # Observation (and start flag) of the row each environment has open.
    self._open_observation = tree.map_structure(
        lambda spec: np.zeros((num_envs, *spec.shape[1:]),
                              spec.dtype.as_numpy_dtype),
        signature.observation)
    self._open_start = np.zeros(num_envs, bool)
    self._opened = np.zeros(num_envs, bool)
    # Flat views of the nested fields, for the per-step copies: a loop over
    # flat lists costs a fraction of tree.map_structure's per-call overhead.
    self._flat_observation = tree.flatten(self._buffers.observation)
    self._flat_action = tree.flatten(self._buffers.action)
    self._flat_extras = tree.flatten(self._buffers.extras)
    self._flat_open_observation = tree.flatten(self._open_observation)
    # One writer for all N streams: every item is a single appended step.
    self._writer = client.trajectory_writer(num_keep_alive_refs=1)
    # Its C++ writer, called directly for each window (see _write).
    self._cpp_writer = self._writer._writer
    self._squeeze = [True] * len(self._flat_buffers)
    # Finished windows not yet written, oldest first; each step writes the
    # windows a step finishes on average (N / (sequence_length - 1)), plus
    # one so the queue drains.
    self._unwritten = collections.deque()
    self._writes_per_step = -(-num_envs // max(1, self._sequence_length - 1)) + 1

  def add_first(self, index, timestep: Optional[dm_env.TimeStep] = None):
    """`add_first(timesteps)`: every row; `add_first(i, timestep)`: env i."""
    timesteps = _as_first(index, timestep)
    if not timesteps.first().all():
      raise ValueError('add_first needs a first timestep.')
    envs = timesteps.env_id
    tree.map_structure(lambda buf, x: buf.__setitem__(envs, x),
                       self._open_observation, timesteps.observation)
    self._open_start[envs] = True
    self._opened[envs] = True

  def add(self, actions, timesteps: Steps,
          extras: Optional[types.NestedArray] = None,
          active: Optional[np.ndarray] = None) -> None:
    """One step of the environments `timesteps.env_id`: row k followed
    `actions[k]` (and `extras` row k). With `active`, only rows k with
    `active[k]` are written (EnvPool resets an ended environment on the
    next step instead of stepping it)."""
    actions, timesteps, extras = _as_batch(actions, timesteps, extras, active)
    index = timesteps.env_id
    if not index.size:
      return
    if not self._opened[index].all():
      raise ValueError('add_first must be called for every environment first.')
    rows = index, self._fill[index]
    buffers = self._buffers
    for buf, x in zip(self._flat_observation, self._flat_open_observation):
      buf[rows] = x[index]
    buffers.start_of_episode[rows] = self._open_start[index]
    for buf, x in zip(self._flat_action, tree.flatten(actions)):
      buf[rows] = x
    lasts = timesteps.last()
    rewards = timesteps.reward
    if self._reward_scaler is not None:
      rewards = self._reward_scaler.scale(index, rewards, lasts)
    buffers.reward[rows] = rewards
    discounts = timesteps.discount
    if not self._final_rows:  # The episode's last row ends its returns.
      discounts = np.where(lasts, 0.0, discounts)
    buffers.discount[rows] = discounts
    if self._has_extras:
      for buf, x in zip(self._flat_extras, tree.flatten(extras)):
        buf[rows] = x
    self._fill[index] += 1
    for buf, x in zip(self._flat_open_observation,
                      tree.flatten(timesteps.observation)):
      buf[index] = x
    self._open_start[index] = False
    self._write_full()

    if lasts.any():  # Rare: episode ends.
      for i in index[lasts]:
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
    """Finished windows join the queue of windows to write; some of the
    queue is written."""
    full = np.flatnonzero(self._fill == self._sequence_length)
    if full.size:
      last = self._sequence_length - 1
      # Copies: the buffers' rows are reused for the next windows, which
      # start with these windows' last rows.
      self._unwritten.extend(zip(*[buf[full] for buf in self._flat_buffers]))
      for buf in self._flat_buffers:
        buf[full, 0] = buf[full, last]
      self._fill[full] = 1
    self._write(self._writes_per_step)

  def _write(self, limit: int) -> None:
    """Up to `limit` queued windows, as items, in the order they finished.

    Environments stepped in lockstep finish their windows on the same step:
    written at once, that step's writes would outlast the environments'
    next step, which EnvPool runs while this thread writes. A few a step
    keep the writer's work spread under the environments' steps."""
    if not self._unwritten:
      return
    # The whole window as one step of the writer's columns, and one item of
    # that step, squeezed: what `writer.append(window)` and
    # `writer.create_item(table, 1.0, [column[-1] for column in
    # writer.history])` do, without the Python wrapper's per-call structure
    # checks and column objects (a third of this loop's Python time at 16
    # environments, profiled). Reverb's C++ writer still checks every
    # item's dtypes and shapes against the table's signature.
    writer = self._cpp_writer
    for _ in range(min(limit, len(self._unwritten))):
      references = writer.Append(list(self._unwritten.popleft()))
      writer.CreateItem(self._table, 1.0,
                        [[reference] for reference in references],
                        self._squeeze)
    # Blocks while the table is full: actors wait for the learner here.
    self._writer.flush(self._max_in_flight_items)

  def flush(self) -> None:
    """Every finished window written (and confirmed by the server)."""
    self._write(len(self._unwritten))
    self._writer.flush()

  def close(self) -> None:
    """Every finished window written and confirmed, then the stream closed
    (the writer's close alone does not wait for the server)."""
    self.flush()
    self._writer.close()
