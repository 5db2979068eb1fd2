"""A test-only gym task that raises inside the node processes told to.

`--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4`: gym's
`module:id` form imports this module wherever the task is made (the launcher
and every node process), which registers the id. It is HalfCheetah-v4, except
that in a process whose environment has ACME_TEST_RAISE_AFTER_STEPS=N (give
it to one node with `config.resources.node_overrides`, e.g.
'actor/1:extra_env=ACME_TEST_RAISE_AFTER_STEPS=300') its step N+1 raises,
with ACME_TEST_BREAKPOINT_AT_STEP=N its step N calls breakpoint(), with
ACME_TEST_PRINT_BYTES_PER_STEP=B every step prints B bytes, and with
ACME_TEST_HOLD_AT_STEP=N and ACME_TEST_HOLD_UNTIL=PATH its step N waits
until PATH exists (a run held, its servers up, while a test looks at it).
"""

import os
import time

import gym
from gym.envs.mujoco import half_cheetah_v4

TASK = 'RaisingHalfCheetah-v4'
RAISE_AFTER_ENV = 'ACME_TEST_RAISE_AFTER_STEPS'
BREAKPOINT_AT_ENV = 'ACME_TEST_BREAKPOINT_AT_STEP'  # breakpoint() at step N.
PRINT_BYTES_ENV = 'ACME_TEST_PRINT_BYTES_PER_STEP'  # A chatty node's output.
HOLD_AT_ENV = 'ACME_TEST_HOLD_AT_STEP'    # Step N waits until the file
HOLD_UNTIL_ENV = 'ACME_TEST_HOLD_UNTIL'   # named here exists.


class InjectedFault(RuntimeError):
  pass


class RaisingHalfCheetah(half_cheetah_v4.HalfCheetahEnv):

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._raise_after = int(os.environ.get(RAISE_AFTER_ENV, '0'))
    self._breakpoint_at = int(os.environ.get(BREAKPOINT_AT_ENV, '0'))
    self._print_bytes = int(os.environ.get(PRINT_BYTES_ENV, '0'))
    self._hold_at = int(os.environ.get(HOLD_AT_ENV, '0'))
    self._hold_until = os.environ.get(HOLD_UNTIL_ENV, '')
    self._steps = 0

  def step(self, action):
    self._steps += 1
    if self._steps == self._breakpoint_at:
      breakpoint()
    if self._hold_at and self._steps == self._hold_at:
      while not os.path.exists(self._hold_until):
        time.sleep(0.2)
    if self._print_bytes:
      print('x' * (self._print_bytes - 1), flush=True)
    if self._raise_after and self._steps > self._raise_after:
      raise InjectedFault(
          f'injected fault: environment step {self._steps} in node '
          f'{os.environ.get("ACME_LAUNCH_NODE", "?")}')
    return super().step(action)


if TASK not in gym.envs.registry:
  gym.register(id=TASK, entry_point=RaisingHalfCheetah, max_episode_steps=1000)
