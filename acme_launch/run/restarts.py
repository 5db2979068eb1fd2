"""What to do when a node dies: restart it, or stop the run.

One policy for every launch type (the local_mp supervisor today; the Ray
launcher reuses it): actors and evaluators hold no state that matters (their
trajectories are in Reverb, their counts in the counter), so one that exits
non-zero or is killed is started again, up to `max_restarts` times per node;
the learner, replay, counter and limiter hold the run's state or its
bookkeeping, so their death stops the run (and `--auto_resume` may start the
whole program again from its checkpoints).

A restarted node gets its restart number (ACME_LAUNCH_NODE_RESTART), from
which program/build.py derives fresh seeds for its environments and policy: the
node's seed stream continues instead of replaying the episodes it played.
"""

import dataclasses
import os
from typing import Dict

import numpy as np

from acme_launch.plan import topology

RESTART_ENV = 'ACME_LAUNCH_NODE_RESTART'   # '1', '2', ... in a restarted node.


@dataclasses.dataclass(frozen=True)
class Decision:
  restart: bool
  attempt: int = 0     # This restart's number (1 = first), when restarting.
  reason: str = ''     # Why not, when stopping.


class RestartPolicy:
  """Counts restarts per node and decides on each death."""

  def __init__(self, max_restarts: int):
    self.max_restarts = max_restarts
    self.restarts: Dict[str, int] = {}

  def on_death(self, node: str) -> Decision:
    if not topology.restartable(node):
      return Decision(
          False, reason=f'{topology.group_of(node)} nodes are not restarted')
    done = self.restarts.get(node, 0)
    if done >= self.max_restarts:
      return Decision(False, reason=f'restarted {done} times already '
                      f'(--max_node_restarts={self.max_restarts})')
    self.restarts[node] = done + 1
    return Decision(True, attempt=done + 1)

  @property
  def total(self) -> int:
    return sum(self.restarts.values())


def seed_after_restarts(seed: int) -> int:
  """In a node process: its seed, or after its k-th restart a new seed
  derived from (seed, k), so a restarted actor plays new episodes."""
  restart = int(os.environ.get(RESTART_ENV, '0'))
  if not restart:
    return seed
  sequence = np.random.SeedSequence([int(seed), 0x7E57A27, restart])
  return int(sequence.generate_state(1)[0] % 2**31)
