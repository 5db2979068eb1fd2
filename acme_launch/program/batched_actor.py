"""An actor that steps several environments with one policy call per step.

A stock Acme actor steps one environment and runs one jitted policy call per
env step, so on a CPU the fixed cost of that call (dispatch, host<->device
copies) dominates: about 500 env steps/s, while HalfCheetah-v4 alone steps
at about 9,400/s on one core. Stepping N environments per process with one
call on the stacked observations amortises that cost N ways.

Everything stays arrays of the N environments on the way from the
environments to the policy to the writer (`envs.TimeSteps`: EnvPool's own
arrays, or the gym backend's timesteps stacked once a step); returns,
lengths and episode ends are numpy operations, and only the rows of
episodes that just ended go through Python one by one (metrics rows, the
gym backend's resets). With EnvPool, the environments step in EnvPool's
thread while this one writes the step before (`send` returns at once; the
writer's work overlaps the environments').

Each environment's trajectory is written exactly as a separate actor's would
be (see adders/batched.py): the learner sees the same data. Metrics rows are
per episode, as in Acme's EnvironmentLoop; steps reach the counter every
second and at every episode end.
"""

import time
from typing import Callable, Union

from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme.jax import variable_utils
from acme.utils import counting
from acme.utils import loggers
from acme.utils import signals
import jax
import launchpad as lp
import numpy as np
import tree

from acme_launch import envs
from acme_launch.adders import batched as batched_adders

# (params, key, batched observations) -> actions, or (actions, extras).
BatchedPolicy = Callable
BatchedAdder = Union[batched_adders.PerEnvAdders,
                     batched_adders.BatchedSequenceAdder]
# N environments end episodes together: steps also reach the counter at least
# this often, so budgets and steps/s do not move in jumps of N episodes.
_REPORT_EVERY_SECONDS = 1.0


def actions_and_extras(policy_output, returns_extras: bool):
  """(actions, extras or None) as numpy, from a batched policy's output.

  `returns_extras`: the agent's adapter's POLICY_RETURNS_EXTRAS (PPO's
  policy also returns the log-probs its learner needs).
  """
  if returns_extras:
    actions, extras = policy_output
    return np.asarray(actions), tree.map_structure(np.asarray, extras)
  return np.asarray(policy_output), None


class BatchedEnvironmentLoop(core.Worker):
  """Runs N environments in lockstep against one batched policy.

  `environments` is envs.PythonEnvironments (N dm_env objects) or
  envs.EnvPoolEnvironments (one EnvPool stepping all N, or, in its async
  mode, N of more each step). An ended environment restarts either at once
  (`reset_some`) or, with EnvPool, on the next step, which then returns its
  first timestep and is not counted.
  """

  def __init__(self, environments, policy: BatchedPolicy,
               variable_client: variable_utils.VariableClient,
               adder: BatchedAdder, random_key,
               counter: counting.Counter, logger: loggers.Logger,
               max_actor_steps: int = 0, policy_returns_extras: bool = False):
    self._environments = environments
    self._policy_returns_extras = policy_returns_extras
    def policy_step(params, key, observations):
      key, policy_key = jax.random.split(key)
      return key, policy(params, policy_key, observations)
    # One jitted call a step: the key split is inside it too.
    self._policy_step = jax.jit(policy_step, backend='cpu')
    self._variable_client = variable_client
    self._adder = adder
    self._random_key = random_key
    self._counter = counter
    self._logger = logger
    # Stop stepping once the counter reaches it (0: never), as
    # nodes.BudgetedEnvironmentLoop does for one environment.
    self._max_actor_steps = max_actor_steps

  # Record a step while its actions are being selected (the selection
  # returns before the actions are needed): central inference's loop,
  # whose policy runs in another process.
  _record_while_selecting = False

  def _start_selecting(self, timesteps: envs.TimeSteps):
    """A function returning `_select_actions(timesteps)`'s result; a loop
    whose policy runs elsewhere starts the call here."""
    result = self._select_actions(timesteps)
    return lambda: result

  def _select_actions(self, timesteps: envs.TimeSteps):
    """(actions, extras) for the rows of `timesteps` (a FIRST row starts
    an episode: recurrent loops reset that environment's state)."""
    self._random_key, output = self._policy_step(
        self._variable_client.params, self._random_key, timesteps.observation)
    return actions_and_extras(output, self._policy_returns_extras)

  def run(self) -> None:
    with signals.runtime_terminator():
      self._run()
    lp.stop_event().wait()  # Budget reached: idle until the program stops.

  def _budget_reached(self, counts) -> bool:
    return bool(self._max_actor_steps and
                counts.get('actor_steps', 0) >= self._max_actor_steps)

  def _run(self) -> None:
    self._variable_client.update_and_wait()
    environments = self._environments
    num_envs = environments.num_envs
    self._returns = np.zeros(num_envs)
    self._lengths = np.zeros(num_envs, np.int64)
    self._starts = np.full(num_envs, time.time())
    self._unreported_steps, self._last_report = 0, time.time()
    self._budget = False
    timesteps = environments.reset()
    self._adder.add_first(timesteps)
    # The actions (and extras) last sent to each environment, by env id:
    # with EnvPool's async mode a batch's rows are any of its environments.
    sent_actions = sent_extras = None
    pipelined = environments.auto_reset  # EnvPool: send, then write.
    stop = lp.stop_event()
    actions, extras = self._select_actions(timesteps)
    environments.send(actions, timesteps.env_id)
    whole = timesteps.env_id.size == num_envs
    if not whole:
      sent_actions = np.zeros((num_envs,) + actions.shape[1:], actions.dtype)
      sent_extras = tree.map_structure(
          lambda x: np.zeros((num_envs,) + x.shape[1:], x.dtype), extras)
    while not stop.is_set():
      previous = actions, extras
      if not whole:  # Store them by env id; look the received ones up.
        sent_actions[timesteps.env_id] = actions
        if extras is not None:
          tree.map_structure(lambda buf, x, ids=timesteps.env_id:
                             buf.__setitem__(ids, x), sent_extras, extras)
      timesteps = environments.recv()
      if not whole:
        ids = timesteps.env_id
        previous = (sent_actions[ids], None if extras is None else
                    tree.map_structure(lambda buf, ids=ids: buf[ids], sent_extras))
      if pipelined and self._record_while_selecting:
        selecting = self._start_selecting(timesteps)
        self._record(*previous, timesteps)
        actions, extras = selecting()
        environments.send(actions, timesteps.env_id)
      elif pipelined:  # The environments step while this step is written.
        actions, extras = self._select_actions(timesteps)
        environments.send(actions, timesteps.env_id)
        self._record(*previous, timesteps)
      else:  # Ended environments restart before the policy sees them.
        timesteps = self._record(*previous, timesteps)
        actions, extras = self._select_actions(timesteps)
        environments.send(actions, timesteps.env_id)
      if time.time() - self._last_report >= _REPORT_EVERY_SECONDS:
        self._report()
      if self._budget:
        return
      self._variable_client.update()

  def _report(self, **counts):
    counts = self._counter.increment(steps=self._unreported_steps, **counts)
    self._unreported_steps, self._last_report = 0, time.time()
    self._budget = self._budget or self._budget_reached(counts)
    return counts

  def _record(self, actions, extras, timesteps: envs.TimeSteps
              ) -> envs.TimeSteps:
    """Writes one received step (`actions` and `extras` row for row), keeps
    the episode statistics; returns `timesteps`, ended environments
    restarted where the environments do not do that themselves."""
    ids = timesteps.env_id
    first = timesteps.first()
    if first.any():  # EnvPool restarted these instead of stepping them.
      stepped = np.flatnonzero(~first)
      self._adder.add(actions[stepped], timesteps.take(stepped),
                      None if extras is None else
                      tree.map_structure(lambda x: x[stepped], extras))
      restarted = timesteps.take(first)
      self._adder.add_first(restarted)
      self._returns[restarted.env_id] = 0.0
      self._lengths[restarted.env_id] = 0
      self._starts[restarted.env_id] = time.time()
      stepped_ids = ids[stepped]
      rewards = timesteps.reward[stepped]
    else:
      self._adder.add(actions, timesteps, extras)
      stepped_ids, rewards = ids, timesteps.reward
    self._returns[stepped_ids] += rewards
    self._lengths[stepped_ids] += 1
    self._unreported_steps += stepped_ids.size
    last = timesteps.last()
    if not last.any():
      return timesteps
    ended = ids[last]
    now = time.time()
    for i in ended:  # Rare: one metrics row per episode.
      counts = self._report(episodes=1)
      elapsed = now - self._starts[i]
      self._logger.write({
          'episode_length': int(self._lengths[i]),
          'episode_return': float(self._returns[i]),
          'steps_per_second': float(self._lengths[i]) / elapsed
                              if elapsed else 0.0,
          **counts,
      })
    if self._environments.auto_reset:
      return timesteps
    restarted = self._environments.reset_some(ended)
    self._adder.add_first(restarted)
    self._returns[ended], self._lengths[ended] = 0.0, 0
    self._starts[ended] = time.time()
    observation = tree.map_structure(np.copy, timesteps.observation)
    rows = np.flatnonzero(last)
    tree.map_structure(lambda buf, x: buf.__setitem__(rows, x),
                       observation, restarted.observation)
    step_type = timesteps.step_type.copy()
    step_type[rows] = restarted.step_type
    return timesteps._replace(step_type=step_type, observation=observation)
