"""Host loss on Ray: a restartable node whose host is gone, moved to a live one.

Kept apart from the supervisor's loop (launch.py) because it is the one part
of a Ray run with no local_mp counterpart, and the subtlest: Ray declares a
host dead only after several missed health checks (docs/ray-faults.md), so
until then it lists the host alive and may place a new actor there, which
dies with it. This module
  - detects lost hosts (LostHosts: Ray lists them alive, their raylet does
    not accept a connection) and keeps new actors off them with a label
    selector on Ray's own node-id label;
  - moves a node (Mover.move): a new Ray actor with the node's demand,
    placed by Ray within PLACEMENT_TIMEOUT_SECONDS, placed again (at most
    MAX_PLACEMENTS actors, not another restart) when the chosen host dies
    before the node starts there;
  - keeps addresses current: the moved node's servers get addresses on its
    new host, and NodeEnv.moved_addresses tells the node which of the
    program's addresses moved where (run/ray/host.FixedAddress).
The supervisor (a Placer) lends what a move needs of the run: actors, host
checks, run-directory files, ports, and starting a node.
"""

import dataclasses
import socket
import time
from typing import Any, Dict, List, Optional, Protocol, Set, Tuple

from acme_launch import errors
from acme_launch.plan import node_env
from acme_launch.run import core

PLACEMENT_TIMEOUT_SECONDS = 60.0
# Ray actors made for one placement of a node, at most: each one after the
# first replaces one whose host died before the node started there.
MAX_PLACEMENTS = 10


@dataclasses.dataclass
class NodeStart:
  """What NodeHost.start gets for a node, kept to start it again, on its
  host or, moved, on another; `addresses` are its servers' in the program
  Launchpad pickled (those of its first host)."""
  argv: List[str]
  env: Dict[str, str]
  data_file: str
  program_ref: Any          # The program's bytes, a Ray ObjectRef.
  log_path: str
  addresses: List[str]

  def args(self, restart: int = 0) -> tuple:
    env = node_env.updated(self.env, restart=restart) if restart else self.env
    return self.argv, env, self.data_file, self.program_ref, self.log_path


def on_host(env: Dict[str, str], where: Dict, run_dir_env: Dict[str, str],
            addresses: List[str], **fields) -> Dict[str, str]:
  """`env` for a node on the host `where` (NodeHost.describe()): its run
  directory there (or mirror), its servers' `addresses`, other NodeEnv
  `fields`."""
  files = node_env.NodeEnv.from_environ(run_dir_env)
  return node_env.updated(
      env, run_dir=files.run_dir, mirror_of=files.mirror_of,
      bind_address=where['ip'], server_addresses=tuple(addresses),
      ray_node_id=where['ray_node_id'], **fields)


class Placer(Protocol):
  """What the supervisor lends a move (RaySupervisor implements it)."""

  def new_actor(self, node: str) -> Any:
    """The node's actor replaced by a new one, placed off the lost hosts."""

  def settle(self, node: str, where: Dict) -> Tuple[Dict[str, str], str]:
    """The node's new host checked; its run-directory env and log path
    there. LaunchError if the host cannot run nodes."""

  def free_addresses(self, node: str, count: int) -> List[str]:
    """`count` addresses with ports free now on the node's host."""

  def start_of(self, node: str) -> NodeStart:
    """How the node was started last."""

  def start_again(self, node: str, line: str, attempt: int,
                  start: Optional[NodeStart] = None) -> None:
    """Says `line`, starts the node (as `start`) with its restart number."""

  def failed(self, node: str, why: str) -> core.Outcome:
    """The run's end, naming the node."""


def wanted(demand) -> str:
  """A node's Ray demand (run/ray/cluster.Demand) as its messages say it."""
  return ', '.join(f'{k}={v:g}' for k, v in demand.as_resources().items())


def host_died(error: Exception) -> bool:
  """Whether a Ray error says an actor's host went, not its own code."""
  import ray
  return (isinstance(error, ray.exceptions.RayActorError) and
          not getattr(error, 'actor_init_failed', False))


def short(error: Exception, limit: int) -> str:
  """An error's text on one line, at most `limit` characters."""
  return ' '.join(str(error).split())[:limit]


def _raylet_answers(host: Dict) -> bool:
  """Whether the raylet of a host of ray.nodes() accepts connections.

  Ray reports an actor of a lost host dead before its health checks declare
  the host dead (seen here: about 10 s before); the raylet's port says now.
  """
  try:
    with socket.create_connection((host['NodeManagerAddress'],
                                   host['NodeManagerPort']), timeout=1.0):
      return True
  except OSError:
    return False


class LostHosts:
  """Ray node ids of hosts seen lost (raylet gone) that Ray may still list
  alive: new actors are kept off them."""

  def __init__(self):
    self.ids: Set[str] = set()

  def note(self) -> None:
    """Asked again each time, so a host cut off briefly is used again once
    it answers; one Ray has declared dead needs no label."""
    import ray
    self.ids = {host['NodeID'] for host in ray.nodes()
                if host.get('Alive') and not _raylet_answers(host)}

  def actor_options(self) -> Dict[str, Any]:
    """Ray actor options that keep a new actor off every lost host."""
    if not self.ids:
      return {}
    return {'label_selector': {
        'ray.io/node-id': f'!in({",".join(sorted(self.ids))})'}}


class _PlacedOnLostHost(Exception):
  """Ray put a moved node's actor on a host the launcher saw lost."""


@dataclasses.dataclass
class Move:
  """A restartable node whose host was lost, waiting for Ray to place it.

  `attempt` is the node's restart count: placing it again because the host
  Ray chose died before the node started there is not another restart.
  """
  describe_ref: Any         # Its new actor's describe(): where Ray put it.
  old_ip: str
  lost: str                 # 'host IP lost', or why else its actor is gone.
  attempt: int
  placements: int = 1       # Ray actors made for this move so far.
  deadline: float = dataclasses.field(
      default_factory=lambda: time.time() + PLACEMENT_TIMEOUT_SECONDS)


class Mover:
  """The nodes being moved, and the hosts they avoid; see the docstring."""

  def __init__(self, placer: Placer, demands: Dict[str, Any],
               max_restarts: int):
    self._placer = placer
    self._demands = demands   # Node name -> its run/ray/cluster.Demand.
    self._max_restarts = max_restarts
    self.lost = LostHosts()
    self.moving: Dict[str, Move] = {}

  def move(self, node: str, where: Dict, attempt: int) -> None:
    """A new Ray actor for `node`, off its host `where`; `advance` starts
    the node once Ray placed it."""
    self.lost.note()
    lost = (f'host {where["ip"]} lost'
            if where['ray_node_id'] in self.lost.ids
            else f'its Ray actor on host {where["ip"]} died')
    print(f'acme-launch: node {node}: {lost}; placing it on a live host',
          flush=True)
    actor = self._placer.new_actor(node)
    self.moving[node] = Move(actor.describe.remote(), where['ip'], lost,
                             attempt)

  def advance(self) -> Optional[core.Outcome]:
    """Starts each moved node Ray placed; the run's end if one cannot be."""
    for node in list(self.moving):
      outcome = self._advance(node)
      if outcome is not None:
        return outcome
    return None

  def _advance(self, node: str) -> Optional[core.Outcome]:
    import ray
    move = self.moving[node]
    ready, _ = ray.wait([move.describe_ref], timeout=0)
    if not ready:
      if time.time() < move.deadline:
        return None
      return self._placer.failed(
          node, f'{move.lost}; Ray placed no host for {node} within '
          f'{PLACEMENT_TIMEOUT_SECONDS:.0f} s (it needs '
          f'{wanted(self._demands[node]) or "nothing"})')
    try:
      where = ray.get(move.describe_ref)
      if where['ray_node_id'] in self.lost.ids:
        # Placed before its host was seen lost (a host without a label
        # selector match cannot be chosen after).
        raise _PlacedOnLostHost(f'host {where["ip"]}')
      run_dir_env, log_path = self._placer.settle(node, where)
      addresses = self._placer.free_addresses(
          node, len(self._placer.start_of(node).addresses))
    except (ray.exceptions.RayError, _PlacedOnLostHost) as e:
      return self._place_again(node, short(e, 160))
    except errors.LaunchError as e:
      return self._placer.failed(node, f'{move.lost}; restarting '
                                 f'{node} failed: {short(e, 300)}')
    del self.moving[node]
    return self._start(node, move, where, run_dir_env, log_path, addresses)

  def _start(self, node, move, where, run_dir_env, log_path, addresses):
    """The moved node started on its new host, told where its servers went."""
    start = self._placer.start_of(node)
    env = on_host(start.env, where, run_dir_env, addresses,
                  moved_from=move.old_ip,
                  moved_addresses=tuple(zip(start.addresses, addresses)))
    start = dataclasses.replace(start, env=env, log_path=log_path)
    line = (f'acme-launch: node {node}: {move.lost}; restarting on '
            f'{where["ip"]} ({move.attempt} of at most '
            f'{self._max_restarts})')
    self._placer.start_again(node, line, move.attempt, start)
    return None

  def _place_again(self, node: str, error: str) -> Optional[core.Outcome]:
    """The host Ray chose for a moved node died before the node started
    there: a new actor on a live host, with the whole placement time again.
    Not a restart of the node: it never ran there."""
    move = self.moving[node]
    if move.placements >= MAX_PLACEMENTS:  # Its actor goes as the run stops.
      return self._placer.failed(
          node, f'{move.lost}; {move.placements} hosts Ray placed {node} '
          f'on were lost before it started (last: {error})')
    self.lost.note()
    print(f'acme-launch: node {node}: the host Ray placed it on was lost '
          f'before it started ({error}); placing it again', flush=True)
    move.describe_ref = self._placer.new_actor(node).describe.remote()
    move.placements += 1
    move.deadline = time.time() + PLACEMENT_TIMEOUT_SECONDS
    return None
