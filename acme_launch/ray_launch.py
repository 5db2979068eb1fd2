"""`--launch_type=ray`: the same program on an existing Ray cluster.

Ray places one actor per Launchpad node (ray_host.NodeHost) with the node's
Ray demand (ray_cluster.py); each actor starts its node with the command
local_mp runs, on its host. This module is the launcher's side:
  1. create the actors and wait until Ray placed every one (a node Ray
     cannot place within PLACEMENT_TIMEOUT_SECONDS: one line, exit 2);
  2. per host, check the run directory is shared (a marker file the
     launcher wrote) and that the bind shim works for the host's address;
  3. give every Courier/Reverb server of a node its host's cluster address
     and a port free there (Launchpad's local launcher says localhost), and
     ACME_LAUNCH_BIND_ADDRESS to the shim, so each server listens there and
     nowhere else;
  4. turn the program into per-node commands exactly as local_mp does
     (supervisor._node_commands), ship Launchpad's pickled program to each
     actor as bytes, and start the nodes;
  5. supervise as local_mp does: a node that exits non-zero, or whose actor
     dies (host lost), stops the run naming it (exit 1); the steps limiter's
     lp.stop() (a stop request file, ray_host.StopRequest) ends it at the
     budget; Ctrl-C / SIGTERM stop gracefully; on the way out every node is
     SIGTERMed, the stateful ones get STOP_TIMEOUT_SECONDS to save, then
     every node process is killed and every actor with it.
The run directory (logs, metrics, progress, checkpoints) must be on a
filesystem every host shares at the same path in this first step.
"""

import os
import signal
import sys
import threading
import time
from typing import Dict, List

from acme_launch import errors
from acme_launch import program as program_lib
from acme_launch import ray_cluster
from acme_launch import ray_host
from acme_launch import resources
from acme_launch import restarts
from acme_launch import rundir
from acme_launch import supervisor
from acme_launch import topology

PLACEMENT_TIMEOUT_SECONDS = 60.0
CALL_TIMEOUT_SECONDS = 30.0   # One round of actor calls (poll, ports, ...).
_MARKER = '.ray_shared_check'


class RaySupervisor(supervisor.Supervisor):
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
    self._echo_stop = threading.Event()

  # Launch --------------------------------------------------------------------

  def run_cluster(self, built: program_lib.BuiltProgram,
                  plan: resources.ResourcePlan) -> supervisor.Outcome:
    """Runs the program; LaunchError (exit 2) if it cannot be placed."""
    start = self._start_time = time.time()
    previous = {s: signal.signal(s, self._on_signal)
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
      self._place(built)
      if self._stop_signal is None:
        self._check_hosts()
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

  def _place(self, built: program_lib.BuiltProgram) -> None:
    import ray  # pylint: disable=g-import-not-at-top
    node_host = ray.remote(ray_host.NodeHost)
    runtime_env = {'env_vars': {'PYTHONPATH': _repo_root()}}
    for demand in self._cluster.demands:
      self._actors[demand.node] = node_host.options(
          num_cpus=demand.num_cpus, num_gpus=demand.num_gpus,
          memory=demand.memory_mb * 2 ** 20 or None,
          resources=dict(demand.custom) or None,
          max_restarts=0, runtime_env=runtime_env,
          name=None).remote(demand.node)
    pending = {self._actors[n].describe.remote(): n for n in self._actors}
    deadline = time.time() + PLACEMENT_TIMEOUT_SECONDS
    while pending and self._stop_signal is None:
      ready, _ = ray.wait(list(pending), num_returns=len(pending),
                          timeout=min(1.0, max(0.0, deadline - time.time())))
      for ref in ready:
        node = pending.pop(ref)
        try:
          self._where[node] = ray.get(ref)
        except ray.exceptions.RayError as e:
          raise errors.LaunchError(
              f'the Ray actor for {node} could not start: '
              f'{" ".join(str(e).split())[:300]}') from None
      if pending and time.time() >= deadline:
        names = sorted(pending.values())
        demand = {d.node: d for d in self._cluster.demands}[names[0]]
        wanted = ', '.join(f'{k}={v:g}' for k, v in
                           demand.as_resources().items())
        raise errors.LaunchError(
            f'Ray placed no host for {", ".join(names)} within '
            f'{PLACEMENT_TIMEOUT_SECONDS:.0f} s (group {demand.group} needs '
            f'{wanted}; other jobs may hold those resources)')

  def _check_hosts(self) -> None:
    import ray  # pylint: disable=g-import-not-at-top
    marker = os.path.join(self._run_dir, _MARKER)
    text = f'{os.getpid()} {time.time()}\n'
    with open(marker, 'w') as f:
      f.write(text)
    try:
      ray_cluster.check_addresses(
          [ray_cluster.Host(w['ray_node_id'], w['ip'], {})
           for w in self._where.values()], self._allow_public)
      by_host = {}
      for node, where in self._where.items():
        by_host.setdefault(where['ray_node_id'], (node, where['ip']))
      refs = {self._actors[node].check_host.remote(marker, text, ip): ip
              for node, ip in by_host.values()}
      for ref, ip in refs.items():
        problem = ray.get(ref, timeout=CALL_TIMEOUT_SECONDS + 60)
        if problem:
          raise errors.LaunchError(f'Ray host {ip}: {problem}')
    finally:
      os.unlink(marker)

  def _launch(self, built: program_lib.BuiltProgram,
              plan: resources.ResourcePlan) -> None:
    import ray  # pylint: disable=g-import-not-at-top
    lp_nodes = {}
    for label, nodes in built.program.groups.items():
      lp_nodes.update(zip(built.nodes_by_label[label], nodes))
    port_refs = {node: self._actors[node].free_ports.remote(
        self._where[node]['ip'], len(lp_nodes[node].addresses))
                 for node in lp_nodes}
    addresses = {node: [f'{self._where[node]["ip"]}:{port}' for port in
                        ray.get(ref, timeout=CALL_TIMEOUT_SECONDS)]
                 for node, ref in port_refs.items()}

    def bind(node: str, lp_node) -> None:
      for address, value in zip(lp_node.addresses, addresses[node]):
        address.bind(ray_host.FixedAddress(value))

    stopper = ray_host.StopRequest(rundir.stop_request_path(self._run_dir))
    with supervisor._program_files_in(  # pylint: disable=protected-access
        os.path.join(self._run_dir, '.launchpad')):
      commands = list(supervisor._node_commands(  # pylint: disable=protected-access
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
      env = dict(env)
      env.update({
          'ACME_LAUNCH_NODE': node,
          'ACME_LAUNCH_RUN_DIR': self._run_dir,
          'ACME_LAUNCH_BIND_ADDRESS': where['ip'],
          'ACME_LAUNCH_SERVER_ADDRESSES': ','.join(addresses[node]),
          'ACME_LAUNCH_RAY_NODE_ID': where['ray_node_id'],
          'PYTHONUNBUFFERED': '1',
      })
      # The program's bytes as a top-level ObjectRef: Ray hands the actor
      # the bytes, fetched once per host.
      self._commands[node] = (argv, env, data_file, program_refs[data_file],
                              rundir.log_path(self._run_dir, node))
      starts.append(self._actors[node].start.remote(*self._commands[node]))
      self._started.append(node)
    ray.get(starts, timeout=CALL_TIMEOUT_SECONDS + 60)

  # Watch -----------------------------------------------------------------------

  def _echo_logs(self) -> None:
    """--show_output: new lines of every node's log, prefixed by the node."""
    offsets = {node: 0 for node in self._started}
    while not self._echo_stop.wait(0.5):
      for node in offsets:
        try:
          with open(rundir.log_path(self._run_dir, node), 'rb') as f:
            f.seek(offsets[node])
            data = f.read()
        except OSError:
          continue
        complete = data[:data.rfind(b'\n') + 1]
        offsets[node] += len(complete)
        for line in complete.decode(errors='replace').splitlines():
          sys.stdout.write(f'[{node}] {line}\n')
      sys.stdout.flush()

  def _watch_cluster(self) -> supervisor.Outcome:
    import ray  # pylint: disable=g-import-not-at-top
    while True:
      if self._stop_signal is not None:
        return self._stopped_outcome()
      if os.path.exists(rundir.stop_request_path(self._run_dir)):
        progress = rundir.read_json(rundir.progress_path(self._run_dir), {})
        return supervisor.Outcome(
            supervisor.EXIT_OK, 'budget_reached'
            if progress.get('budget_reached') else 'program_stopped')
      refs = {self._actors[n].poll.remote(): n for n in self._started}
      codes = {}
      for ref, node in refs.items():
        try:
          codes[node] = ray.get(ref, timeout=CALL_TIMEOUT_SECONDS)
        except ray.exceptions.RayError as e:
          where = self._where.get(node, {}).get('ip', '?')
          return supervisor.Outcome(
              supervisor.EXIT_NODE_FAILED, 'node_failed', failed_node=node,
              failed_log_tail=supervisor._tail(  # pylint: disable=protected-access
                  rundir.log_path(self._run_dir, node)) +
              f'\n(the Ray actor running {node} on host {where} is gone: '
              f'{type(e).__name__})')
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
          return supervisor.Outcome(
              supervisor.EXIT_NODE_FAILED, 'node_failed', failed_node=node,
              failed_log_tail=supervisor._tail(  # pylint: disable=protected-access
                  rundir.log_path(self._run_dir, node)) +
              f'\n(node {node} on host {where} {how}; {decision.reason})')
      if codes and all(code is not None for code in codes.values()):
        return supervisor.Outcome(supervisor.EXIT_OK, 'all_nodes_exited')
      if self._wall_time_exceeded():
        return supervisor.Outcome(supervisor.EXIT_OK, 'max_wall_time')
      self._report()
      time.sleep(0.5)

  def _restart_on_host(self, node: str, how: str, attempt: int) -> None:
    """restarts.RestartPolicy's restart, by the node's Ray actor, on its host."""
    import ray  # pylint: disable=g-import-not-at-top
    line = (f'acme-launch: node {node} {how}; restarting it ({attempt} of at '
            f'most {self._restarts.max_restarts})')
    print(line, flush=True)
    argv, env, data_file, program_ref, log_path = self._commands[node]
    with open(log_path, 'a') as f:
      f.write(f'\n{line}\n')
    env = {**env, restarts.RESTART_ENV: str(attempt)}
    ray.get(self._actors[node].start.remote(argv, env, data_file, program_ref,
                                            log_path),
            timeout=CALL_TIMEOUT_SECONDS + 60)

  def _stopped_outcome(self) -> supervisor.Outcome:
    progress = rundir.read_json(rundir.progress_path(self._run_dir), {})
    if progress.get('budget_reached'):
      return supervisor.Outcome(supervisor.EXIT_OK, 'budget_reached')
    if self._stop_signal == signal.SIGINT:
      return supervisor.Outcome(supervisor.EXIT_INTERRUPTED, 'interrupted')
    return supervisor.Outcome(128 + self._stop_signal, 'terminated')

  # Stop ------------------------------------------------------------------------

  def _stop_cluster(self) -> None:
    """SIGTERM every node; once the saving ones are done, kill them all."""
    import ray  # pylint: disable=g-import-not-at-top
    for node in self._started:
      self._actors[node].terminate.remote()
    saving = [n for n in self._started
              if topology.saves_on_stop(n)]
    deadline = time.time() + supervisor.STOP_TIMEOUT_SECONDS
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
    import ray  # pylint: disable=g-import-not-at-top
    kills = [self._actors[n].kill.remote() for n in self._started]
    try:
      ray.wait(kills, num_returns=len(kills), timeout=15)
    except ray.exceptions.RayError:
      pass
    # ray.kill ends each actor's process; a node process still alive dies
    # with it (PR_SET_PDEATHSIG).
    for actor in self._actors.values():
      try:
        ray.kill(actor)
      except ray.exceptions.RayError:
        pass
    self._started = []


def _repo_root() -> str:
  return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
