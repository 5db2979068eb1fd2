"""An actor that steps several environments with one policy call per step.

A stock Acme actor steps one environment and runs one jitted policy call per
env step, so on a CPU the fixed cost of that call (dispatch, host<->device
copies) dominates: about 500 env steps/s, while HalfCheetah-v4 alone steps
at about 9,400/s on one core. Stepping N environments per process with one
call on the stacked observations amortises that cost N ways.

Each environment keeps its own Reverb adder, so its trajectory is written
exactly as a separate actor's would be: the learner sees the same kind of
data. Metrics rows are per episode, as in Acme's EnvironmentLoop; steps
reach the counter every second and at every episode end.
"""

import time
from typing import Callable, List, Sequence

from acme import adders as adders_lib
from acme import core
from acme.jax import variable_utils
from acme.utils import counting
from acme.utils import loggers
from acme.utils import signals
import dm_env
import jax
import numpy as np
import tree

# (params, key, batched observations) -> actions, or (actions, extras).
BatchedPolicy = Callable
# N environments end episodes together: steps also reach the counter at least
# this often, so budgets and steps/s do not move in jumps of N episodes.
_REPORT_EVERY_SECONDS = 1.0


class BatchedEnvironmentLoop(core.Worker):
  """Runs N environments in lockstep against one batched policy."""

  def __init__(self, environments: Sequence[dm_env.Environment],
               policy: BatchedPolicy,
               variable_client: variable_utils.VariableClient,
               adders: Sequence[adders_lib.Adder], random_key,
               counter: counting.Counter, logger: loggers.Logger):
    assert len(environments) == len(adders)
    self._environments = list(environments)
    self._policy = jax.jit(policy, backend='cpu')
    self._variable_client = variable_client
    self._adders = list(adders)
    self._random_key = random_key
    self._counter = counter
    self._logger = logger

  def _select_actions(self, observations):
    self._random_key, key = jax.random.split(self._random_key)
    output = self._policy(self._variable_client.params, key, observations)
    # PPO's policy also returns extras (the log-prob its learner needs).
    if isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], dict):
      actions, extras = output
    else:
      actions, extras = output, None
    if extras is not None:
      extras = tree.map_structure(np.asarray, extras)
    return np.asarray(actions), extras

  def run(self) -> None:
    with signals.runtime_terminator():
      self._run()

  def _run(self) -> None:
    self._variable_client.update_and_wait()
    timesteps: List[dm_env.TimeStep] = []
    for environment, adder in zip(self._environments, self._adders):
      timesteps.append(environment.reset())
      adder.add_first(timesteps[-1])
    returns = [0.0] * len(timesteps)
    lengths = [0] * len(timesteps)
    starts = [time.time()] * len(timesteps)
    unreported_steps, last_report = 0, time.time()
    while True:
      observations = tree.map_structure(
          lambda *xs: np.stack(xs), *[t.observation for t in timesteps])
      actions, extras = self._select_actions(observations)
      for i, (environment, adder) in enumerate(
          zip(self._environments, self._adders)):
        timestep = environment.step(actions[i])
        if extras is None:
          adder.add(actions[i], timestep)
        else:
          adder.add(actions[i], timestep,
                    extras=tree.map_structure(lambda x, i=i: x[i], extras))
        returns[i] += float(timestep.reward)
        lengths[i] += 1
        unreported_steps += 1
        if timestep.last():
          counts = self._counter.increment(episodes=1, steps=unreported_steps)
          unreported_steps, last_report = 0, time.time()
          elapsed = time.time() - starts[i]
          self._logger.write({
              'episode_length': lengths[i],
              'episode_return': returns[i],
              'steps_per_second': lengths[i] / elapsed if elapsed else 0.0,
              **counts,
          })
          timestep = environment.reset()
          adder.add_first(timestep)
          returns[i], lengths[i], starts[i] = 0.0, 0, time.time()
        timesteps[i] = timestep
      if time.time() - last_report >= _REPORT_EVERY_SECONDS:
        self._counter.increment(steps=unreported_steps)
        unreported_steps, last_report = 0, time.time()
      self._variable_client.update()
