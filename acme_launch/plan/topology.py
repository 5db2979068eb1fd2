"""The program's nodes, defined once.

Every module that needs to know a node's group, its file names, whether it
saves on stop or may be restarted, or whose placement it shares, asks here
rather than re-splitting names like 'actor/3'. The program builder
(program/build.py) adds exactly these nodes; the planner places those that are not
placed like another.
"""

import dataclasses
from typing import Tuple

# Nodes that hold the run's state: they save on stop, and a failure of one
# cannot be mended by restarting it alone.
STATEFUL_GROUPS = ('replay', 'counter', 'learner')
# Nodes a failure may restart (--max_node_restarts), with new seeds.
RESTARTABLE_GROUPS = ('actor', 'evaluator')


@dataclasses.dataclass(frozen=True)
class Node:
  group: str             # 'replay', 'counter', 'limiter', 'learner', ...
  index: int
  placed_like: str = ''  # A node whose placement it shares ('' = its own).

  @property
  def name(self) -> str:
    return f'{self.group}/{self.index}'

  @property
  def file_stem(self) -> str:
    return file_stem(self.name)


def program_nodes(num_actors: int, num_evaluators: int) -> Tuple[Node, ...]:
  """Every node of a program, in launch order."""
  return ((Node('replay', 0), Node('counter', 0),
           # The steps limiter only polls the counter: it shares its place.
           Node('limiter', 0, placed_like='counter/0'), Node('learner', 0)) +
          tuple(Node('actor', i) for i in range(num_actors)) +
          tuple(Node('evaluator', i) for i in range(num_evaluators)))


def group_of(name: str) -> str:
  """'actor/3' -> 'actor'."""
  return name.split('/', 1)[0]


def file_stem(name: str) -> str:
  """'actor/3' -> 'actor_3': the node's logs, metrics and record files."""
  return name.replace('/', '_')


def saves_on_stop(name: str) -> bool:
  return group_of(name) in STATEFUL_GROUPS


def restartable(name: str) -> bool:
  return group_of(name) in RESTARTABLE_GROUPS
