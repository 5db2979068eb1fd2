"""What to do when a node dies: restart it, or stop the run.

One policy for every launch type (the local_mp supervisor today; the Ray
launcher reuses it): actors and evaluators hold no state that matters (their
trajectories are in Reverb, their counts in the counter), so one that exits
non-zero or is killed is started again, up to `max_restarts` times per node;
the learner, replay and counter hold the run's state or its
bookkeeping, so their death stops the run (and `--auto_resume` may start the
whole program again from its checkpoints).

A restarted node gets its restart number (NodeEnv.restart), from which
program/seeds.py derives fresh seeds for its environments and policy: the
node's seed stream continues instead of replaying the episodes it played.
"""

import dataclasses
from typing import Dict

from acme_launch.plan import topology


@dataclasses.dataclass(frozen=True)
class Decision:
  restart: bool
  attempt: int = 0     # This restart's number (1 = first), when restarting.
  reason: str = ''     # Why not, when stopping.


class RestartPolicy:
  """Counts restarts per node and decides on each death. `post_mortem_node`
  (--debug_node with --pdb) is never started again: its death follows the
  post-mortem debugger the user ended ("q ends it, and with it the run"),
  and a new one would raise where it did and open another."""

  def __init__(self, max_restarts: int, post_mortem_node: str = ''):
    self.max_restarts = max_restarts
    self.post_mortem_node = post_mortem_node
    self.restarts: Dict[str, int] = {}

  def on_death(self, node: str) -> Decision:
    if node == self.post_mortem_node:
      return Decision(False, reason='its post-mortem debugger (--pdb) has '
                      'ended; it is not restarted')
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
