"""The envpool backend: one EnvPool instance steps an actor's N environments."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import dm_env
import numpy as np

from acme_launch.envs import registry
from acme_launch.envs.batched import FIRST, LAST, MID, TimeSteps


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
  ConcatObservationWrapper does on the gym backend. An Atari game runs
  under envs/atari.py's protocol, its frames kept as uint8; `evaluation`
  picks the evaluators' whole games and real scores over the actors' life
  losses and clipped rewards.

  `batch_size` below `num_envs` is EnvPool's async mode: `send` hands
  actions for the environments of the last batch and returns at once, `recv`
  returns the next `batch_size` environments that finished a step, whichever
  they are (`TimeSteps.env_id`), so EnvPool's threads step some environments
  while the policy acts for others. 0: sync (every step is all of them).

  `stagger_starts` (async mode only; EnvPool's sync mode cannot restart one
  environment alone): each environment's first episode ends at a random
  step in [1, the time limit], as a time limit does (discount 1), and the
  environment restarts on its next step. Otherwise every environment of a
  task whose episodes all run to the limit (HalfCheetah) restarts at the
  same step throughout a run, and an actor's episode starts reach the
  learner in bursts: ppo_mujoco's 32 environments put them into about one
  learner batch in 16 (docs/agents.md).
  """

  auto_reset = True

  def __init__(self, env_name: str, num_envs: int, seed: int,
               max_episode_steps: int = 0, num_threads: int = 1,
               batch_size: int = 0, evaluation: bool = False,
               stagger_starts: bool = False):
    import envpool
    task = registry.parse_task(env_name)
    family = registry.family(task.family)
    kwargs = (dict(family.envpool_options(evaluation))
              if family.envpool_options is not None else {})
    if max_episode_steps:
      kwargs['max_episode_steps'] = max_episode_steps
    self._batch_size = int(batch_size) or num_envs
    if not 0 < self._batch_size <= num_envs:
      raise ValueError(f'batch_size {batch_size} not in [1, {num_envs}]')
    self._pool = envpool.make_dm(
        family.envpool_id(task.name), num_envs=num_envs,
        batch_size=self._batch_size,
        seed=int(seed), num_threads=max(1, int(num_threads)), **kwargs)
    self._num_envs = num_envs
    self._env_ids = np.arange(num_envs, dtype=np.int32)
    self._limit = int(self._pool.spec.config.max_episode_steps)
    self._elapsed = np.zeros(num_envs, np.int64)
    self._pending = 0  # Environments sent actions and not yet received.
    # Staggered starts: where each first episode ends, which environments
    # are still in it, and which ended there and restart on their next send.
    self._cut_at = self._in_first = self._restart = None
    if stagger_starts and self._batch_size < num_envs:
      rng = np.random.default_rng([int(seed), 0x57A66E2])
      self._cut_at = rng.integers(1, self._limit + 1, num_envs)
      self._in_first = np.ones(num_envs, bool)
      self._restart = np.zeros(num_envs, bool)
    observation_spec = self._pool.observation_spec()
    if 'obs' not in observation_spec._fields:  # dm_control's named fields.
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
      # Frames stay uint8 (a quarter of the replay's memory); the rest float32.
      dtype = np.uint8 if obs.dtype == np.uint8 else np.float32
      self._observation_spec = specs.BoundedArray(
          obs.shape, dtype,
          np.broadcast_to(obs.minimum, obs.shape).astype(dtype),
          np.broadcast_to(obs.maximum, obs.shape).astype(dtype),
          name='observation')
    action = self._pool.action_spec()
    if isinstance(action, specs.DiscreteArray):
      self._action_spec = specs.DiscreteArray(action.num_values, name='action')
      self._low = self._high = None
    else:
      self._action_spec = specs.BoundedArray(
          action.shape, np.float32, -np.ones(action.shape, np.float32),
          np.ones(action.shape, np.float32),
          name=None if self._fields is not None else 'action')
      self._low = np.broadcast_to(action.minimum, action.shape)
      self._high = np.broadcast_to(action.maximum, action.shape)
      self._half_range = 0.5 * (self._high - self._low)

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def batch_size(self) -> int:
    return self._batch_size

  @property
  def task_action_bounds(self):
    """(minimum, maximum) of the task's own continuous actions, onto which
    `send`'s [-1, 1] is clipped and rescaled; None for discrete ones."""
    return None if self._low is None else (self._low, self._high)

  @property
  def envpool_config(self) -> dict:
    """EnvPool's own options of this pool, as it was made."""
    return dict(self._pool.spec.config._asdict())

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
    if self._cut_at is not None:
      self._in_first[:], self._restart[:] = True, False
    if self._batch_size == self._num_envs:
      return self._arrays(self._pool.reset())
    self._pool.async_reset()
    self._pending = self._num_envs
    return self.recv()

  def send(self, actions: np.ndarray, env_id: np.ndarray) -> None:
    """Actions for environments `env_id` (a batch `recv` returned); an
    environment whose staggered first episode just ended restarts instead
    (EnvPool ignores the action after a last step too)."""
    self._pending += len(env_id)
    if self._restart is not None and self._restart[env_id].any():
      restart = self._restart[env_id]
      self._restart[env_id[restart]] = False
      # EnvPool's async_reset for these environments only.
      self._pool._reset(np.asarray(env_id[restart], np.int32))
      actions, env_id = np.asarray(actions)[~restart], env_id[~restart]
      if not env_id.size:
        return
    self._pool.send(self._scale(actions), env_id)

  def recv(self) -> TimeSteps:
    self._pending -= self._batch_size
    return self._arrays(self._pool.recv())

  def step(self, actions: np.ndarray) -> TimeSteps:
    """Sync mode: one step of every environment."""
    return self._arrays(self._pool.step(self._scale(actions), self._env_ids))

  def _scale(self, actions: np.ndarray) -> np.ndarray:
    actions = np.asarray(actions)
    if self._low is not None:  # [-1, 1] -> the task's bounds, as the gym path.
      # np.minimum/np.maximum: np.clip's Python wrapper costs more than
      # the clipping of a small batch.
      actions = self._low + (np.minimum(np.maximum(actions, -1.0), 1.0)
                             + 1.0) * self._half_range
    return actions

  def _arrays(self, batch) -> TimeSteps:
    """EnvPool's batch as it is, but float32 and discount 1 at time limits."""
    step_types = np.asarray(batch.step_type).astype(np.int8)
    env_id = np.asarray(batch.observation.env_id, np.int64)
    elapsed = np.where(step_types == FIRST, 0, self._elapsed[env_id] + 1)
    self._elapsed[env_id] = elapsed
    discounts = np.asarray(batch.discount, np.float32)
    truncated = (step_types == LAST) & (elapsed >= self._limit)
    if truncated.any():
      discounts = np.where(truncated, np.float32(1.0), discounts)
    if self._cut_at is not None:
      step_types, discounts = self._stagger(step_types, discounts, env_id,
                                            elapsed)
    return TimeSteps(step_types, np.asarray(batch.reward, np.float32),
                     discounts, self._observations(batch.observation),
                     env_id)

  def _stagger(self, step_types, discounts, env_id, elapsed):
    """Ends first episodes at their staggered step, as a time limit."""
    self._in_first[env_id[step_types == LAST]] = False  # Ended before it.
    cut = (self._in_first[env_id] & (step_types == MID) &
           (elapsed >= self._cut_at[env_id]))
    if not cut.any():
      return step_types, discounts
    self._in_first[env_id[cut]] = False
    self._restart[env_id[cut]] = True
    return (np.where(cut, np.int8(LAST), step_types),
            np.where(cut, np.float32(1.0), discounts))

  def _observations(self, observation) -> np.ndarray:
    if self._fields is None:
      return np.asarray(observation.obs, self._observation_spec.dtype)
    return np.concatenate(
        [np.asarray(getattr(observation, f), np.float32).reshape(
            len(observation.env_id), -1) for f in self._fields], axis=1)

  def close(self) -> None:
    self._pool.close()


class EnvPoolEnvironment(dm_env.Environment):
  """A one-environment EnvPool as a plain dm_env (evaluators, 1-env actors)."""

  def __init__(self, pool: EnvPoolEnvironments):
    self._pool = pool

  @property
  def task_action_bounds(self):
    return self._pool.task_action_bounds

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
