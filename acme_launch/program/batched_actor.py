"""An actor that steps several environments with one policy call per step.

A stock Acme actor steps one environment and runs one jitted policy call per
env step, so on a CPU the fixed cost of that call (dispatch, host<->device
copies) dominates: about 500 env steps/s, while HalfCheetah-v4 alone steps
at about 9,400/s on one core. Stepping N environments per process with one
call on the stacked observations amortises that cost N ways.

Each environment's trajectory is written exactly as a separate actor's would
be (see program/batched_adders.py): the learner sees the same data. Metrics rows are
per episode, as in Acme's EnvironmentLoop; steps reach the counter every
second and at every episode end.
"""

import time
from typing import Callable, List, Union

from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
from acme import core
from acme.jax import variable_utils
from acme.utils import counting
from acme.utils import loggers
from acme.utils import signals
import dm_env
import jax
import launchpad as lp
import numpy as np
import tree

from acme_launch.program import batched_adders

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

  `environments` is environments.PythonEnvironments (N dm_env objects) or
  environments.EnvPoolEnvironments (one EnvPool stepping all N). An ended
  environment restarts either at once (`reset_one`) or, with EnvPool, on
  the next step, which then returns its first timestep and is not counted.
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

  def _select_actions(self, observations):
    self._random_key, output = self._policy_step(
        self._variable_client.params, self._random_key, observations)
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
    budget_reached = False
    environments = self._environments
    timesteps: List[dm_env.TimeStep] = environments.reset()
    for i, timestep in enumerate(timesteps):
      self._adder.add_first(i, timestep)
    num_envs = len(timesteps)
    returns = np.zeros(num_envs)
    lengths = np.zeros(num_envs, np.int64)
    starts = [time.time()] * num_envs
    unreported_steps, last_report = 0, time.time()
    stop = lp.stop_event()
    while not stop.is_set():
      observations = tree.map_structure(
          lambda *xs: np.stack(xs), *[t.observation for t in timesteps])
      actions, extras = self._select_actions(observations)
      timesteps = environments.step(actions)
      restarted = np.array([t.first() for t in timesteps])
      if restarted.any():  # EnvPool: these reset instead of stepping.
        stepped = ~restarted
        self._adder.add(actions, timesteps, extras, active=stepped)
        for i in np.flatnonzero(restarted):
          self._adder.add_first(i, timesteps[i])
          returns[i], lengths[i], starts[i] = 0.0, 0, time.time()
      else:
        stepped = None
        self._adder.add(actions, timesteps, extras)
      for i, timestep in enumerate(timesteps):
        if stepped is None or stepped[i]:
          returns[i] += timestep.reward
          lengths[i] += 1
          unreported_steps += 1
      for i, timestep in enumerate(timesteps):
        if not timestep.last():
          continue
        counts = self._counter.increment(episodes=1, steps=unreported_steps)
        unreported_steps, last_report = 0, time.time()
        budget_reached = self._budget_reached(counts)
        elapsed = time.time() - starts[i]
        self._logger.write({
            'episode_length': int(lengths[i]),
            'episode_return': float(returns[i]),
            'steps_per_second': float(lengths[i]) / elapsed if elapsed else 0.0,
            **counts,
        })
        if not environments.auto_reset:
          timesteps[i] = environments.reset_one(i)
          self._adder.add_first(i, timesteps[i])
          returns[i], lengths[i], starts[i] = 0.0, 0, time.time()
      if time.time() - last_report >= _REPORT_EVERY_SECONDS:
        budget_reached = self._budget_reached(
            self._counter.increment(steps=unreported_steps))
        unreported_steps, last_report = 0, time.time()
      if budget_reached:
        return
      self._variable_client.update()
