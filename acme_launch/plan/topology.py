"""The program's nodes, defined once.

Every module that needs to know a node's group, its file names, whether it
saves on stop or may be restarted, or whose placement it shares, asks here
rather than re-splitting names like 'actor/3'. The program builder
(program/build.py) adds exactly these nodes, and the planner places them.
"""

import dataclasses
from typing import List, Tuple

# Nodes that hold the run's state: they save on stop, and a failure of one
# cannot be mended by restarting it alone.
STATEFUL_GROUPS = ('replay', 'counter', 'learner')
# Nodes a failure may restart (--max_node_restarts), with new seeds. The
# inference node's per-environment states start afresh (program/inference.py).
RESTARTABLE_GROUPS = ('actor', 'evaluator', 'inference')


@dataclasses.dataclass(frozen=True)
class Node:
  group: str             # 'replay', 'counter', 'learner', 'actor', ...
  index: int

  @property
  def name(self) -> str:
    return f'{self.group}/{self.index}'

  @property
  def file_stem(self) -> str:
    return file_stem(self.name)


def program_nodes(num_actors: int, num_evaluators: int,
                  inference: bool = False) -> Tuple[Node, ...]:
  """Every node of a program, in launch order; `inference`: with the
  central inference node (config.inference='central')."""
  return ((Node('replay', 0), Node('counter', 0), Node('learner', 0)) +
          ((Node('inference', 0),) if inference else ()) +
          tuple(Node('actor', i) for i in range(num_actors)) +
          tuple(Node('evaluator', i) for i in range(num_evaluators)))


def node_list(num_actors: int, num_evaluators: int,
              inference: bool = False) -> List[Tuple[str, int]]:
  """The nodes the resource plan places, as (group, index), in launch order."""
  return [(node.group, node.index)
          for node in program_nodes(num_actors, num_evaluators, inference)]


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
