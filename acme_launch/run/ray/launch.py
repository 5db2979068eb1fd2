"""`--launch_type=ray`: the same program on an existing Ray cluster.

Ray places one actor per Launchpad node (ray_host.NodeHost) with the node's
Ray demand (run/ray/cluster.py); each actor starts its node with the command
local_mp runs, on its host. This module is the launcher's side:
  1. create the actors and wait until Ray placed every one (a node Ray
     cannot place within moves.PLACEMENT_TIMEOUT_SECONDS: one line, exit 2);
  2. per host, check whether it sees the run directory (a marker file the
     launcher wrote) and that the bind shim works for the host's address;
  3. give every Courier/Reverb server of a node its host's cluster address
     and a port free there (Launchpad's local launcher says localhost), and
     its NodeEnv's bind_address to the shim, so each server listens there and
     nowhere else; tell every actor the run's hosts, the only other machines
     its node's servers accept connections from (the shim's hosts file,
     rewritten before a node moved to another host starts there), and the
     run's key (RUN_DIR/.run_key, run/loopback.py), which every connection
     between two hosts must prove (the shim's handshake; none under
     --run_key=off, which the driver warns of);
  4. turn the program into per-node commands exactly as local_mp does
     (core.node_commands), ship Launchpad's pickled program to each
     actor as bytes, and start the nodes;
  5. supervise as local_mp does, under the same restarts.RestartPolicy: an
     actor or evaluator that exits non-zero is started again by its Ray
     actor on its host; one whose Ray actor is gone (its host lost) is
     moved to a live host, with new server addresses there (moves.py); any other
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
import secrets
import sys
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from acme_launch import paths
from acme_launch import errors
from acme_launch import safe_dirs
from acme_launch.program import build as program_lib
from acme_launch.run.ray import cluster as ray_cluster
from acme_launch.run.ray import files as ray_files
from acme_launch.run.ray import host as ray_host
from acme_launch.run.ray import moves
from acme_launch.run.ray.moves import NodeStart
from acme_launch.plan import resources
from acme_launch.run import core
from acme_launch.run import loopback
from acme_launch import layout
from acme_launch.plan import topology

CALL_TIMEOUT_SECONDS = 30.0   # One round of actor calls (poll, ports, ...).
_MARKER = '.ray_shared_check'


def _ports(ref) -> List[int]:
  """A NodeHost's free_ports(); its LaunchError (no port left on its
  host) as this process's own, so the user sees its one line."""
  import ray
  try:
    return ray.get(ref, timeout=CALL_TIMEOUT_SECONDS)
  except ray.exceptions.RayTaskError as e:
    if isinstance(e.cause, errors.LaunchError):
      raise errors.LaunchError(str(e.cause)) from None
    raise


def _write_marker(run_dir: str, text: str) -> None:
  """RUN_DIR/_MARKER holding `text`, made anew (a killed launcher's is
  removed first), through the checked run directory, never through a link."""
  fd = safe_dirs.open_checked(run_dir, 'run directory')
  try:
    try:
      os.unlink(_MARKER, dir_fd=fd)
    except FileNotFoundError:
      pass
    marker = safe_dirs.open_file(
        fd, _MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
        os.path.join(run_dir, _MARKER))
  finally:
    os.close(fd)
  with os.fdopen(marker, 'w') as f:
    f.write(text)


class RaySupervisor(core.SupervisorCore):
  """Runs one program on a Ray cluster to its end; see the module docstring.

  It is the moves.Placer of its moves.Mover: the new actors, host checks,
  ports and starts a moved node needs.
  """

  def __init__(self, run_dir: str, cluster: ray_cluster.Cluster,
               allow_public_address: bool = False, run_key: str = 'hosts',
               **kwargs):
    super().__init__(run_dir, **kwargs)
    self._cluster = cluster
    self._allow_public = allow_public_address
    self._actors: Dict[str, object] = {}    # Node name -> NodeHost handle.
    self._where: Dict[str, Dict] = {}       # Node name -> NodeHost.describe().
    self._started: List[str] = []
    self._starts: Dict[str, NodeStart] = {}
    self._demands = {d.node: d for d in cluster.demands}
    self._checked_hosts: Set[str] = set()   # Ray node ids check_host passed.
    self._unshared_hosts: Set[str] = set()  # Those without the run dir.
    self._files = ray_files.Shipping(run_dir)
    self._mover = moves.Mover(self, self._demands,
                              self._restarts.max_restarts)
    self._echo_stop = threading.Event()
    self._run_key = b''  # loopback.run_key_of, read as the run starts.
    self._key_off = run_key == 'off'  # --run_key=off: no proof (a warning).

  # Launch --------------------------------------------------------------------

  def run_cluster(self, built: program_lib.BuiltProgram,
                  plan: resources.ResourcePlan) -> core.Outcome:
    """Runs the program; LaunchError (exit 2) if it cannot be placed."""
    start = self._start_time = time.time()
    try:  # Before any actor exists: a bad key file is one line, exit 2.
      if not self._key_off:
        self._run_key = loopback.run_key_of(self._run_dir)
    except ValueError as e:
      raise errors.LaunchError(str(e)) from None
    with self._signals_handled():
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
    outcome.wall_time = time.time() - start
    outcome.restarts = dict(self._restarts.restarts)
    return outcome

  def new_actor(self, node: str):
    """A new NodeHost actor for `node` with its demand (the old one killed:
    if only unreachable, its node dies too); Ray picks a host that fits,
    other than the hosts seen lost (moves.LostHosts)."""
    import ray
    if node in self._actors:
      try:
        ray.kill(self._actors[node])
      except ray.exceptions.RayError:
        pass
      self._files.forget(node)
    demand = self._demands[node]
    self._actors[node] = ray.remote(ray_host.NodeHost).options(
        **self._mover.lost.actor_options(),
        num_cpus=demand.num_cpus, num_gpus=demand.num_gpus,
        memory=demand.memory_mb * 2 ** 20 or None,
        resources=dict(demand.custom) or None,
        max_restarts=0, runtime_env={'env_vars': {
            'PYTHONPATH': os.pathsep.join((*self._python_path, paths.ROOT)),
            # Ray's workers lower their own priority to niceness 15 at start
            # (its worker_niceness), and a node process would inherit it:
            # on a host with other work its nodes then get what is left of
            # the CPU (bench/cluster.py under load: ray/local_mp 0.57-0.75).
            # Nodes are the work here, so they keep the default priority.
            'RAY_worker_niceness': '0'}},
        name=None).remote(demand.node)
    return self._actors[node]

  def _place(self, built: program_lib.BuiltProgram) -> None:
    import ray
    for demand in self._cluster.demands:
      self.new_actor(demand.node)
    pending = {self._actors[n].describe.remote(): n for n in self._actors}
    placements: Dict[str, int] = {}
    deadline = time.time() + moves.PLACEMENT_TIMEOUT_SECONDS
    while pending and self._stop_signal is None:
      ready, _ = ray.wait(list(pending), num_returns=len(pending),
                          timeout=min(1.0, max(0.0, deadline - time.time())))
      for ref in ready:
        node = pending.pop(ref)
        try:
          self._where[node] = ray.get(ref)
        except ray.exceptions.RayError as e:
          placements[node] = placements.get(node, 1) + 1
          if (not moves.host_died(e) or
              placements[node] > moves.MAX_PLACEMENTS):
            raise errors.LaunchError(
                f'the Ray actor for {node} could not start: '
                f'{moves.short(e, 300)}') from None
          # Its host died before the actor started: place it again, on a
          # live host, with the whole placement time again.
          self._mover.lost.note()
          print(f'acme-launch: node {node}: the host Ray placed it on was '
                'lost before it started; placing it again', flush=True)
          pending[self.new_actor(node).describe.remote()] = node
          deadline = time.time() + moves.PLACEMENT_TIMEOUT_SECONDS
      if pending and time.time() >= deadline:
        names = sorted(pending.values())
        demand = self._demands[names[0]]
        raise errors.LaunchError(
            f'Ray placed no host for {", ".join(names)} within '
            f'{moves.PLACEMENT_TIMEOUT_SECONDS:.0f} s (group {demand.group} '
            f'needs {moves.wanted(demand)}; other jobs may hold those '
            'resources)')

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
    # Random: a host sees the run directory only if it reads this text.
    text = secrets.token_hex(16)
    _write_marker(self._run_dir, text)
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
      try:
        os.unlink(marker)
      except FileNotFoundError:
        pass

  def settle(self, node: str, where: Dict) -> Tuple[Dict[str, str], str]:
    """A moved node's new host checked and made one of the run's hosts; its
    run-directory env and log path."""
    self._where[node] = where
    self._check_hosts([node])
    self._share_hosts(settling=node)
    return self._place_files(node)

  def _share_hosts(self, settling: str = '') -> None:
    """Every live actor (and `settling`'s new one) gets the addresses of the
    hosts the run's nodes are on now, a lost host's left out."""
    import ray
    nodes = [n for n in self._where
             if n == settling or n not in self._mover.moving]
    hosts = sorted({self._where[n]['ip'] for n in nodes})
    refs = [self._actors[n].allow_hosts.remote(hosts, self._run_key)
            for n in nodes]
    ready, late = ray.wait(refs, num_returns=len(refs),
                           timeout=CALL_TIMEOUT_SECONDS)
    for ref in ready:
      try:
        ray.get(ref)
      except ray.exceptions.RayActorError:
        pass  # Its host is lost: that node's move will follow.
    if late:
      print(f'acme-launch: warning: {len(late)} node(s) did not take the '
            f'list of the run\'s hosts within {CALL_TIMEOUT_SECONDS:.0f} s; '
            'their servers admit the hosts they knew', file=sys.stderr,
            flush=True)

  def free_addresses(self, node: str, count: int) -> List[str]:
    """`count` addresses with ports free now on the node's host."""
    ip = self._where[node]['ip']
    ports = _ports(self._actors[node].free_ports.remote(ip, count))
    return [f'{ip}:{port}' for port in ports]

  def _launch(self, built: program_lib.BuiltProgram,
              plan: resources.ResourcePlan) -> None:
    import ray
    self._share_hosts()
    lp_nodes = {}
    for label, nodes in built.program.groups.items():
      lp_nodes.update(zip(built.nodes_by_label[label], nodes))
    port_refs = {node: self._actors[node].free_ports.remote(
        self._where[node]['ip'], len(lp_nodes[node].addresses))
                 for node in lp_nodes}
    addresses = {node: [f'{self._where[node]["ip"]}:{port}'
                        for port in _ports(ref)]
                 for node, ref in port_refs.items()}

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
      data_file = argv[argv.index('--data_file') + 1]
      run_dir_env, log_path = self._place_files(node)
      env = moves.on_host(env, self._where[node], run_dir_env,
                          addresses[node], node=node,
                          compilation_cache=self._compilation_cache)
      env['PYTHONUNBUFFERED'] = '1'
      # The program's bytes as a top-level ObjectRef: Ray hands the actor
      # the bytes, fetched once per host.
      self._starts[node] = NodeStart(argv, env, data_file,
                                     program_refs[data_file], log_path,
                                     addresses[node])
      starts.append(self._actors[node].start.remote(
          *self._starts[node].args()))
      self._started.append(node)
    ray.get(starts, timeout=CALL_TIMEOUT_SECONDS + 60)

  def _place_files(self, node: str):
    """The node's run-directory env and log path where it runs now."""
    shared = self._where[node]['ray_node_id'] not in self._unshared_hosts
    return self._files.place(node, self._actors[node], shared)

  def start_of(self, node: str) -> NodeStart:
    return self._starts[node]

  def start_again(self, node: str, line: str, attempt: int,
                  start: Optional[NodeStart] = None) -> None:
    """restarts.RestartPolicy's restart, by the node's Ray actor: on its
    host, or as `start` on the host it moved to; moved (again) if its actor
    went with its host meanwhile."""
    import ray
    if start is not None:
      self._starts[node] = start
    print(line, flush=True)
    with os.fdopen(safe_dirs.open_append_nofollow(
        layout.log_path(self._run_dir, node)), 'a') as f:
      f.write(f'\n{line}\n')
    try:
      ray.get(self._actors[node].start.remote(
          *self._starts[node].args(restart=attempt)),
              timeout=CALL_TIMEOUT_SECONDS + 60)
    except ray.exceptions.RayError:
      self._mover.move(node, self._where[node], attempt)

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
      outcome = self._mover.advance()
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
          how = core.how_it_ended(code)
          where = self._where[node]['ip']
          decision = self._restarts.on_death(node)
          if decision.restart:
            self.start_again(node, self._restart_line(
                node, f'on host {where} {how}', decision.attempt),
                             decision.attempt)
            codes[node] = None
            continue
          return self.failed(
              node, f'node {node} on host {where} {how}; {decision.reason}')
      if (codes and not self._mover.moving and
          all(code is not None for code in codes.values())):
        return core.Outcome(core.EXIT_OK, 'all_nodes_exited')
      if self._wall_time_exceeded():
        return core.Outcome(core.EXIT_OK, 'max_wall_time')
      self._report()
      time.sleep(0.5)

  def _running(self) -> List[str]:
    return [n for n in self._started if n not in self._mover.moving]

  def _on_actor_lost(self, node: str,
                     error: str) -> Optional[core.Outcome]:
    """A node's Ray actor is gone: move it elsewhere, or stop the run."""
    decision = self._restarts.on_death(node)
    if decision.restart:
      self._mover.move(node, self._where[node], decision.attempt)
      return None
    where = self._where[node]['ip']
    return self.failed(node, f'the Ray actor running {node} on host {where} '
                       f'is gone: {error}; {decision.reason}')

  def failed(self, node: str, why: str) -> core.Outcome:
    """The run's end, naming `node`, with the end of its log and `why`."""
    self._files.pull()  # The end of its log, if it ran without the run dir.
    return core.Outcome(
        core.EXIT_NODE_FAILED, 'node_failed', failed_node=node,
        failed_log_tail=layout.log_tail(
            layout.log_path(self._run_dir, node)) + f'\n({why})')

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
    self._mover.moving.clear()
