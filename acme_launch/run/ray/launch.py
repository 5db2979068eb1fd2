"""`--launch_type=ray`: the same program on an existing Ray cluster.

Ray places one actor per Launchpad node (ray_host.NodeHost) with the node's
Ray demand (run/ray/cluster.py); each actor starts its node with the command
local_mp runs, on its host. This module is the launcher's side:
  1. create the actors and wait until Ray placed every one (a node Ray
     cannot place within PLACEMENT_TIMEOUT_SECONDS: one line, exit 2);
  2. per host, check whether it sees the run directory (a marker file the
     launcher wrote) and that the bind shim works for the host's address;
  3. give every Courier/Reverb server of a node its host's cluster address
     and a port free there (Launchpad's local launcher says localhost), and
     its NodeEnv's bind_address to the shim, so each server listens there and
     nowhere else;
  4. turn the program into per-node commands exactly as local_mp does
     (core.node_commands), ship Launchpad's pickled program to each
     actor as bytes, and start the nodes;
  5. supervise as local_mp does, under the same restarts.RestartPolicy: an
     actor or evaluator that exits non-zero is started again by its Ray
     actor on its host; one whose Ray actor is gone (its host lost) gets a
     new Ray actor, which Ray places on a host that fits its demand, and
     new server addresses there (NodeEnv.moved_addresses); any other
     node's death, or one past its restarts, stops the run naming it
     (exit 1; driver.py's --auto_resume may start it again); the counter's steps
     limiter's lp.stop() (a stop request file, ray_host.StopRequest) ends it at the
     budget; Ctrl-C / SIGTERM stop gracefully; on the way out every node is
     SIGTERMed, the stateful ones get STOP_TIMEOUT_SECONDS to save, then
     every node process is killed and every actor with it.
The run directory stays on the launcher's host. Nodes on a host that shares
it (same path) write there directly; a node on a host that does not writes
into a mirror on its host, which the launcher pulls back while the run goes
and once more at its end (run/ray/files.py says what travels and how).
"""

import os
import signal
import socket
import sys
import threading
import time
from typing import Dict, List, Optional, Set

from acme_launch import paths
from acme_launch import errors
from acme_launch.program import build as program_lib
from acme_launch.run.ray import cluster as ray_cluster
from acme_launch.run.ray import files as ray_files
from acme_launch.run.ray import host as ray_host
from acme_launch.plan import node_env
from acme_launch.plan import resources
from acme_launch.run import core
from acme_launch import layout
from acme_launch.plan import topology

PLACEMENT_TIMEOUT_SECONDS = 60.0
# Ray actors made for one placement of a node, at most: each one after the
# first replaces one whose host died before the node started there.
MAX_PLACEMENTS = 10
CALL_TIMEOUT_SECONDS = 30.0   # One round of actor calls (poll, ports, ...).
_MARKER = '.ray_shared_check'
# A moved node's NodeEnv fields, written by _advance_move (node_env.py).
_MIRROR_OF = node_env.variable('mirror_of')
_BIND_ADDRESS = node_env.variable('bind_address')
_SERVER_ADDRESSES = node_env.variable('server_addresses')
_RAY_NODE_ID = node_env.variable('ray_node_id')
_MOVED_FROM = node_env.variable('moved_from')
_MOVED_ADDRESSES = node_env.variable('moved_addresses')
_RESTART = node_env.variable('restart')


class _Move:
  """A restartable node whose host was lost, waiting for Ray to place it.

  `attempt` is the node's restart count: placing it again because the host
  Ray chose died before the node started there is not another restart.
  """

  def __init__(self, describe_ref, old_ip: str, lost: str, attempt: int):
    self.describe_ref = describe_ref
    self.old_ip = old_ip
    self.lost = lost        # 'host IP lost', or why else its actor is gone.
    self.attempt = attempt
    self.placements = 1     # Ray actors made for this move so far.
    self.deadline = time.time() + PLACEMENT_TIMEOUT_SECONDS


class RaySupervisor(core.SupervisorCore):
  """Runs one program on a Ray cluster to its end; see the module docstring."""

  def __init__(self, run_dir: str, cluster: ray_cluster.Cluster,
               allow_public_address: bool = False, **kwargs):
    super().__init__(run_dir, **kwargs)
    self._cluster = cluster
    self._allow_public = allow_public_address
    self._actors: Dict[str, object] = {}    # Node name -> NodeHost handle.
    self._where: Dict[str, Dict] = {}       # Node name -> NodeHost.describe().
    self._started: List[str] = []
    self._commands: Dict[str, tuple] = {}   # Node name -> its start() args.
    self._demands = {d.node: d for d in cluster.demands}
    self._launched_addresses: Dict[str, List[str]] = {}  # In the pickles.
    self._checked_hosts: Set[str] = set()   # Ray node ids check_host passed.
    self._unshared_hosts: Set[str] = set()  # Those without the run dir.
    self._files = ray_files.Shipping(run_dir)
    self._moving: Dict[str, _Move] = {}
    # Ray node ids of hosts seen lost (raylet gone) that Ray may still list
    # alive: new actors are kept off them (_new_actor).
    self._lost_hosts: Set[str] = set()
    self._echo_stop = threading.Event()

  # Launch --------------------------------------------------------------------

  def run_cluster(self, built: program_lib.BuiltProgram,
                  plan: resources.ResourcePlan) -> core.Outcome:
    """Runs the program; LaunchError (exit 2) if it cannot be placed."""
    start = self._start_time = time.time()
    previous = {s: signal.signal(s, self._on_signal)
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
      self._place(built)
      if self._stop_signal is None:
        self._check_hosts(list(self._where))
        self._launch(built, plan)
      if self._show_output:
        threading.Thread(target=self._echo_logs, daemon=True).start()
      outcome = self._watch_cluster()
    finally:
      self._stop_cluster()
      self._echo_stop.set()
      for s, handler in previous.items():
        signal.signal(s, handler)
    outcome.wall_time = time.time() - start
    outcome.restarts = dict(self._restarts.restarts)
    return outcome

  def _new_actor(self, demand: ray_cluster.Demand):
    """A NodeHost actor with the node's demand; Ray picks a host that fits,
    other than the hosts seen lost.

    Ray declares a host dead only after several missed health checks (see
    docs on Ray's timeouts); until then it may place an actor there, which
    dies with the host. A label selector on Ray's own node-id label keeps
    the launcher's new actors off every host it has seen lost.
    """
    import ray
    avoid = ({'label_selector': {
        'ray.io/node-id': f'!in({",".join(sorted(self._lost_hosts))})'}}
             if self._lost_hosts else {})
    return ray.remote(ray_host.NodeHost).options(
        **avoid,
        num_cpus=demand.num_cpus, num_gpus=demand.num_gpus,
        memory=demand.memory_mb * 2 ** 20 or None,
        resources=dict(demand.custom) or None,
        max_restarts=0, runtime_env={'env_vars': {
            'PYTHONPATH': os.pathsep.join((*self._python_path, _repo_root())),
            # Ray's workers lower their own priority to niceness 15 at start
            # (its worker_niceness), and a node process would inherit it:
            # on a host with other work its nodes then get what is left of
            # the CPU (bench/cluster.py under load: ray/local_mp 0.57-0.75).
            # Nodes are the work here, so they keep the default priority.
            'RAY_worker_niceness': '0'}},
        name=None).remote(demand.node)

  def _place(self, built: program_lib.BuiltProgram) -> None:
    import ray
    for demand in self._cluster.demands:
      self._actors[demand.node] = self._new_actor(demand)
    pending = {self._actors[n].describe.remote(): n for n in self._actors}
    placements: Dict[str, int] = {}
    deadline = time.time() + PLACEMENT_TIMEOUT_SECONDS
    while pending and self._stop_signal is None:
      ready, _ = ray.wait(list(pending), num_returns=len(pending),
                          timeout=min(1.0, max(0.0, deadline - time.time())))
      for ref in ready:
        node = pending.pop(ref)
        try:
          self._where[node] = ray.get(ref)
        except ray.exceptions.RayError as e:
          placements[node] = placements.get(node, 1) + 1
          if (not _host_died(e) or
              placements[node] > MAX_PLACEMENTS):
            raise errors.LaunchError(
                f'the Ray actor for {node} could not start: '
                f'{_short(e, 300)}') from None
          # Its host died before the actor started: place it again, on a
          # live host, with the whole placement time again.
          self._note_lost_hosts()
          print(f'acme-launch: node {node}: the host Ray placed it on was '
                'lost before it started; placing it again', flush=True)
          self._actors[node] = self._new_actor(self._demands[node])
          pending[self._actors[node].describe.remote()] = node
          deadline = time.time() + PLACEMENT_TIMEOUT_SECONDS
      if pending and time.time() >= deadline:
        names = sorted(pending.values())
        demand = {d.node: d for d in self._cluster.demands}[names[0]]
        wanted = ', '.join(f'{k}={v:g}' for k, v in
                           demand.as_resources().items())
        raise errors.LaunchError(
            f'Ray placed no host for {", ".join(names)} within '
            f'{PLACEMENT_TIMEOUT_SECONDS:.0f} s (group {demand.group} needs '
            f'{wanted}; other jobs may hold those resources)')

  def _check_hosts(self, nodes: List[str]) -> None:
    """Each new host of `nodes` runs the shim; notes those that do not see
    the run directory (their nodes write into a mirror, run/ray/files.py)."""
    import ray
    by_host = {}
    for node in nodes:
      where = self._where[node]
      if where['ray_node_id'] not in self._checked_hosts:
        by_host.setdefault(where['ray_node_id'], (node, where['ip']))
    if not by_host:
      return
    marker = os.path.join(self._run_dir, _MARKER)
    text = f'{os.getpid()} {time.time()}\n'
    with open(marker, 'w') as f:
      f.write(text)
    try:
      ray_cluster.check_addresses(
          [ray_cluster.Host(host, ip, {}) for host, (_, ip) in by_host.items()],
          self._allow_public)
      refs = {host: self._actors[node].check_host.remote(marker, text, ip)
              for host, (node, ip) in by_host.items()}
      for host, ref in refs.items():
        shared, problem = ray.get(ref, timeout=CALL_TIMEOUT_SECONDS + 60)
        ip = by_host[host][1]
        if problem:
          raise errors.LaunchError(f'Ray host {ip}: {problem}')
        if not shared:
          self._unshared_hosts.add(host)
      self._checked_hosts.update(by_host)
    finally:
      os.unlink(marker)

  def _launch(self, built: program_lib.BuiltProgram,
              plan: resources.ResourcePlan) -> None:
    import ray
    lp_nodes = {}
    for label, nodes in built.program.groups.items():
      lp_nodes.update(zip(built.nodes_by_label[label], nodes))
    port_refs = {node: self._actors[node].free_ports.remote(
        self._where[node]['ip'], len(lp_nodes[node].addresses))
                 for node in lp_nodes}
    addresses = {node: [f'{self._where[node]["ip"]}:{port}' for port in
                        ray.get(ref, timeout=CALL_TIMEOUT_SECONDS)]
                 for node, ref in port_refs.items()}
    self._launched_addresses = addresses

    def bind(node: str, lp_node) -> None:
      for address, value in zip(lp_node.addresses, addresses[node]):
        address.bind(ray_host.FixedAddress(value))

    stopper = ray_host.StopRequest(layout.stop_request_path(self._run_dir))
    with core.program_files_in(os.path.join(self._run_dir, '.launchpad')):
      commands = list(core.node_commands(
          built, plan, program_stopper=stopper, bind_addresses=bind))
      program_refs = {}
      for _, argv, _ in commands:
        path = argv[argv.index('--data_file') + 1]
        if path not in program_refs:
          with open(path, 'rb') as f:
            program_refs[path] = ray.put(f.read())
    starts = []
    for node, argv, env in commands:
      where = self._where[node]
      data_file = argv[argv.index('--data_file') + 1]
      run_dir_env, log_path = self._place_files(node)
      env = node_env.updated(
          dict(env, **run_dir_env), node=node, bind_address=where['ip'],
          server_addresses=tuple(addresses[node]),
          ray_node_id=where['ray_node_id'],
          compilation_cache=self._compilation_cache)
      env['PYTHONUNBUFFERED'] = '1'
      # The program's bytes as a top-level ObjectRef: Ray hands the actor
      # the bytes, fetched once per host.
      self._commands[node] = (argv, env, data_file, program_refs[data_file],
                              log_path)
      starts.append(self._actors[node].start.remote(*self._commands[node]))
      self._started.append(node)
    ray.get(starts, timeout=CALL_TIMEOUT_SECONDS + 60)

  def _place_files(self, node: str):
    """The node's run-directory env and log path where it runs now."""
    shared = self._where[node]['ray_node_id'] not in self._unshared_hosts
    return self._files.place(node, self._actors[node], shared)

  # Watch -----------------------------------------------------------------------

  def _echo_logs(self) -> None:
    """--show_output: new lines of every node's log, prefixed by the node."""
    offsets = {node: 0 for node in self._started}
    while not self._echo_stop.wait(0.5):
      for node in offsets:
        try:
          with open(layout.log_path(self._run_dir, node), 'rb') as f:
            f.seek(offsets[node])
            data = f.read()
        except OSError:
          continue
        complete = data[:data.rfind(b'\n') + 1]
        offsets[node] += len(complete)
        for line in complete.decode(errors='replace').splitlines():
          sys.stdout.write(f'[{node}] {line}\n')
      sys.stdout.flush()

  def _watch_cluster(self) -> core.Outcome:
    import ray
    while True:
      self._files.pull()  # Nodes on hosts without the run directory.
      if self._stop_signal is not None:
        return self._stopped_outcome()
      if os.path.exists(layout.stop_request_path(self._run_dir)):
        progress = layout.read_json(layout.progress_path(self._run_dir), {})
        return core.Outcome(
            core.EXIT_OK, 'budget_reached'
            if progress.get('budget_reached') else 'program_stopped')
      for node in list(self._moving):
        outcome = self._advance_move(node)
        if outcome is not None:
          return outcome
      refs = {self._actors[n].poll.remote(): n for n in self._running()}
      codes = {}
      # One deadline for the round: hosts cut off together are seen lost
      # together, not one CALL_TIMEOUT_SECONDS after another.
      deadline = time.time() + CALL_TIMEOUT_SECONDS
      for ref, node in refs.items():
        try:
          codes[node] = ray.get(ref, timeout=max(0.0, deadline - time.time()))
        except ray.exceptions.RayError as e:
          outcome = self._on_actor_lost(node, type(e).__name__)
          if outcome is not None:
            return outcome
      for node, code in codes.items():
        if code is not None and code != 0:
          how = (f'was killed by signal {-code}' if code < 0
                 else f'exited with code {code}')
          where = self._where[node]['ip']
          decision = self._restarts.on_death(node)
          if decision.restart:
            self._restart_on_host(node, f'on host {where} {how}',
                                  decision.attempt)
            codes[node] = None
            continue
          return self._failed(
              node, f'node {node} on host {where} {how}; {decision.reason}')
      if (codes and not self._moving and
          all(code is not None for code in codes.values())):
        return core.Outcome(core.EXIT_OK, 'all_nodes_exited')
      if self._wall_time_exceeded():
        return core.Outcome(core.EXIT_OK, 'max_wall_time')
      self._report()
      time.sleep(0.5)

  def _restart_on_host(self, node: str, how: str, attempt: int) -> None:
    """restarts.RestartPolicy's restart, by the node's Ray actor, on its host."""
    import ray
    line = (f'acme-launch: node {node} {how}; restarting it ({attempt} of at '
            f'most {self._restarts.max_restarts})')
    print(line, flush=True)
    argv, env, data_file, program_ref, log_path = self._commands[node]
    with open(layout.log_path(self._run_dir, node), 'a') as f:
      f.write(f'\n{line}\n')
    env = node_env.updated(env, restart=attempt)
    try:
      ray.get(self._actors[node].start.remote(argv, env, data_file,
                                              program_ref, log_path),
              timeout=CALL_TIMEOUT_SECONDS + 60)
    except ray.exceptions.RayError:
      self._move(node, attempt)  # Its actor went with its host meanwhile.

  def _running(self) -> List[str]:
    return [n for n in self._started if n not in self._moving]

  def _on_actor_lost(self, node: str,
                     error: str) -> Optional[core.Outcome]:
    """A node's Ray actor is gone: move it elsewhere, or stop the run."""
    decision = self._restarts.on_death(node)
    if decision.restart:
      self._move(node, decision.attempt)
      return None
    where = self._where[node]['ip']
    return self._failed(node, f'the Ray actor running {node} on host {where} '
                        f'is gone: {error}; {decision.reason}')

  def _failed(self, node: str, why: str) -> core.Outcome:
    self._files.pull()  # The end of its log, if it ran without the run dir.
    return core.Outcome(
        core.EXIT_NODE_FAILED, 'node_failed', failed_node=node,
        failed_log_tail=core.log_tail(
            layout.log_path(self._run_dir, node)) + f'\n({why})')

  def _move(self, node: str, attempt: int) -> None:
    """A new Ray actor for `node`; _advance_move starts it once placed."""
    import ray
    try:
      ray.kill(self._actors[node])  # If only unreachable: its node dies too.
    except ray.exceptions.RayError:
      pass
    where = self._where[node]
    self._note_lost_hosts()
    lost = (f'host {where["ip"]} lost'
            if where['ray_node_id'] in self._lost_hosts
            else f'its Ray actor on host {where["ip"]} died')
    print(f'acme-launch: node {node}: {lost}; placing it on a live host',
          flush=True)
    self._files.forget(node)
    self._actors[node] = self._new_actor(self._demands[node])
    self._moving[node] = _Move(self._actors[node].describe.remote(),
                               where['ip'], lost, attempt)

  def _place_again(self, node: str,
                   error: str) -> Optional[core.Outcome]:
    """The host Ray chose for a moved node died before the node started
    there: a new actor on a live host, with the whole placement time again.
    Not a restart of the node: it never ran there."""
    import ray
    move = self._moving[node]
    try:
      ray.kill(self._actors[node])
    except ray.exceptions.RayError:
      pass
    if move.placements >= MAX_PLACEMENTS:
      return self._failed(node, f'{move.lost}; {move.placements} hosts Ray '
                          f'placed {node} on were lost before it started '
                          f'(last: {error})')
    self._note_lost_hosts()
    print(f'acme-launch: node {node}: the host Ray placed it on was lost '
          f'before it started ({error}); placing it again', flush=True)
    self._files.forget(node)
    self._actors[node] = self._new_actor(self._demands[node])
    move.describe_ref = self._actors[node].describe.remote()
    move.placements += 1
    move.deadline = time.time() + PLACEMENT_TIMEOUT_SECONDS
    return None

  def _note_lost_hosts(self) -> None:
    """The hosts new actors avoid: those Ray still lists alive whose raylet
    does not answer. Asked again each time, so a host cut off briefly is
    used again once it answers; one Ray has declared dead needs no label."""
    import ray
    self._lost_hosts = {host['NodeID'] for host in ray.nodes()
                        if host.get('Alive') and not _raylet_answers(host)}

  def _advance_move(self, node: str) -> Optional[core.Outcome]:
    """Starts a moved node on its new host once Ray placed its actor."""
    import ray
    move = self._moving[node]
    ready, _ = ray.wait([move.describe_ref], timeout=0)
    if not ready:
      if time.time() < move.deadline:
        return None
      wanted = ', '.join(f'{k}={v:g}' for k, v in
                         self._demands[node].as_resources().items())
      return self._failed(node, f'{move.lost}; Ray placed no '
                          f'host for {node} within '
                          f'{PLACEMENT_TIMEOUT_SECONDS:.0f} s (it needs '
                          f'{wanted or "nothing"})')
    actor = self._actors[node]
    try:
      where = ray.get(move.describe_ref)
      if where['ray_node_id'] in self._lost_hosts:
        # Placed before its host was seen lost (a host without a label
        # selector match cannot be chosen after).
        raise _PlacedOnLostHost(f'host {where["ip"]}')
      self._where[node] = where
      self._check_hosts([node])
      run_dir_env, log_path = self._place_files(node)
      ports = ray.get(actor.free_ports.remote(
          where['ip'], len(self._launched_addresses[node])),
                      timeout=CALL_TIMEOUT_SECONDS)
    except (ray.exceptions.RayError, _PlacedOnLostHost) as e:
      return self._place_again(node, _short(e, 160))
    except errors.LaunchError as e:
      return self._failed(node, f'{move.lost}; restarting '
                          f'{node} failed: {_short(e, 300)}')
    addresses = [f'{where["ip"]}:{port}' for port in ports]
    argv, env, data_file, program_ref, _ = self._commands[node]
    env = {k: v for k, v in env.items() if k != _MIRROR_OF}
    env = {**env, **run_dir_env, _BIND_ADDRESS: where['ip'],
           _SERVER_ADDRESSES: ','.join(addresses),
           _RAY_NODE_ID: where['ray_node_id'],
           _MOVED_FROM: move.old_ip,
           _MOVED_ADDRESSES: ','.join(
               f'{old}={new}' for old, new in
               zip(self._launched_addresses[node], addresses))}
    self._commands[node] = (argv, env, data_file, program_ref, log_path)
    del self._moving[node]
    line = (f'acme-launch: node {node}: {move.lost}; restarting on '
            f'{where["ip"]} ({move.attempt} of at most '
            f'{self._restarts.max_restarts})')
    print(line, flush=True)
    with open(layout.log_path(self._run_dir, node), 'a') as f:
      f.write(f'\n{line}\n')
    env = {**env, _RESTART: str(move.attempt)}
    try:
      ray.get(actor.start.remote(argv, env, data_file, program_ref, log_path),
              timeout=CALL_TIMEOUT_SECONDS + 60)
    except ray.exceptions.RayError:
      self._move(node, move.attempt)  # Lost again already: place it anew.
    return None

  def _stopped_outcome(self) -> core.Outcome:
    progress = layout.read_json(layout.progress_path(self._run_dir), {})
    if progress.get('budget_reached'):
      return core.Outcome(core.EXIT_OK, 'budget_reached')
    if self._stop_signal == signal.SIGINT:
      return core.Outcome(core.EXIT_INTERRUPTED, 'interrupted')
    return core.Outcome(128 + self._stop_signal, 'terminated')

  # Stop ------------------------------------------------------------------------

  def _stop_cluster(self) -> None:
    """SIGTERM every node; once the saving ones are done, kill them all."""
    import ray
    for node in self._running():
      self._actors[node].terminate.remote()
    saving = [n for n in self._running() if topology.saves_on_stop(n)]
    deadline = time.time() + core.STOP_TIMEOUT_SECONDS
    while saving and time.time() < deadline:
      refs = [self._actors[n].poll.remote() for n in saving]
      try:
        codes = ray.get(refs, timeout=max(0.1, deadline - time.time()))
      except ray.exceptions.RayError:
        break  # An actor is gone; kill below.
      saving = [n for n, code in zip(saving, codes) if code is None]
      if saving:
        time.sleep(0.2)
    self._kill_all()

  def _kill_all(self) -> None:
    import ray
    kills = [self._actors[n].kill.remote() for n in self._running()]
    try:
      ray.wait(kills, num_returns=len(kills), timeout=15)
    except ray.exceptions.RayError:
      pass
    # Every node has stopped: what the last ones wrote comes over now.
    self._files.pull(last=True)
    # ray.kill ends each actor's process; a node process still alive dies
    # with it (PR_SET_PDEATHSIG).
    for actor in self._actors.values():
      try:
        ray.kill(actor)
      except ray.exceptions.RayError:
        pass
    self._started = []
    self._moving = {}


class _PlacedOnLostHost(Exception):
  """Ray put a moved node's actor on a host the launcher saw lost."""


def _host_died(error: Exception) -> bool:
  """Whether a Ray error says an actor's host went, not its own code."""
  import ray
  return (isinstance(error, ray.exceptions.RayActorError) and
          not getattr(error, 'actor_init_failed', False))


def _short(error: Exception, limit: int) -> str:
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


def _repo_root() -> str:
  return paths.ROOT
