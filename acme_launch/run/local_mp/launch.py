"""`local_mp`: starts the program's node processes and watches them until
the run ends.

Launchpad turns the program into one command per node, as its own local
launcher does; this module then runs those commands itself instead of
handing them to a terminal (gnome-terminal, tmux, xterm, or Launchpad's
`output_to_files`, which writes to one shared temp folder). That gives:
  - one log file per node in the run directory (optionally echoed, prefixed
    with the node's name, to this terminal);
  - fail-fast: a node that exits non-zero or dies stops the whole run, and the
    launcher names it and shows the end of its log;
  - no orphans: each child dies with the launcher (PR_SET_PDEATHSIG) and is
    killed by process group on stop.
How one node's process starts, logs and dies is children.py.

Its servers listen on loopback and answer only the run's user (the shim,
run/loopback.py). With --run_key=all, every connection to one of the run's
ports also proves the run's key (RUN_DIR/.run_key, handed to each node by
its path, with the list of those ports): a process of the same user
without the key is refused too.

The run ends when the step budget is reached (the counter node's steps limiter calls
`lp.stop()`, which signals this process with SIGTERM and leaves
`budget_reached` in progress.json), when a node fails, or when the user stops it.
"""

import os
import signal
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from acme_launch import errors
from acme_launch import layout
from acme_launch import paths
from acme_launch.plan import node_env
from acme_launch.plan import resources
from acme_launch.plan import topology
from acme_launch.program import build as program_lib
from acme_launch.run import core
from acme_launch.run import disk_space
from acme_launch.run import forkserver
from acme_launch.run import loopback
from acme_launch.run import ports
from acme_launch.run import process_env
from acme_launch.run import progress as progress_lib
from acme_launch.run.local_mp import children
from acme_launch.run.local_mp.children import NodeLog, NodeProcess


class Supervisor(core.SupervisorCore):
  """Runs one launched program to its end; see the module docstring."""

  def __init__(self, run_dir: str, show_output: bool = False,
               max_wall_time: float = 0.0,
               reporter: Optional[progress_lib.ProgressReporter] = None,
               preload: str = '', debug_node: str = '', pdb: bool = False,
               max_node_restarts: int = 0,
               node_log_max_bytes: int = 20 * 2**20,
               disk_guard_bytes: int = 0, python_path: Sequence[str] = (),
               compilation_cache: str = '', node_start: str = 'fork',
               early_fork_server: Optional[forkserver.ForkServer] = None,
               run_key: str = 'hosts'):
    super().__init__(run_dir, show_output=show_output,
                     max_wall_time=max_wall_time, reporter=reporter,
                     max_node_restarts=max_node_restarts,
                     python_path=python_path,
                     compilation_cache=compilation_cache,
                     post_mortem_node=debug_node if pdb else '')
    self._disk_guard_bytes = disk_guard_bytes
    self._disk_checked = 0.0
    self._node_log_max_bytes = node_log_max_bytes
    self._debug_node = debug_node  # Runs in the foreground of this terminal.
    self._pdb = pdb
    self._preload = preload  # The loopback shim for every node process.
    self._children: List[NodeProcess] = []
    # --node_start=fork: node processes forked from one fork server.
    self._node_start = node_start
    self._fork_server: Optional[forkserver.ForkServer] = None
    self._fork_server_log: Optional[NodeLog] = None
    # Started by the launcher before the program was built: adopted or
    # stopped by _start_fork_server.
    self._early_fork_server = early_fork_server
    self._key_on_loopback = run_key == 'all'  # --run_key=all.
    self._key_env: Dict[str, str] = {}  # Its key file and the run's ports.

  def run_multiprocess(self, built: program_lib.BuiltProgram,
                       plan: resources.ResourcePlan) -> core.Outcome:
    # Each server's port, held by this process until the run ends (ports.py).
    held = ports.PortHolder()
    taken: List[int] = []

    def bind(unused_name: str, lp_node) -> None:
      for address in lp_node.addresses:
        taken.append(held.take())
        address.bind(ports.HeldAddress(f'localhost:{taken[-1]}'))

    try:
      with core.program_files_in(os.path.join(self._run_dir, '.launchpad')):
        commands = list(core.node_commands(built, plan, bind_addresses=bind))
      if self._key_on_loopback:
        try:
          self._key_env = self._loopback_key_env(taken)
        except errors.LaunchError:
          self._stop_fork_server()  # act.py's early one: nothing started.
          raise
      return self.run_commands(commands)
    finally:
      held.release()

  def run_commands(self, commands: Sequence[Tuple[str, List[str],
                                                  Dict[str, str]]]
                   ) -> core.Outcome:
    """Starts one process per (node, argv, env overrides) and watches them.

    The commands are Launchpad's for the program's nodes; any will do (the
    supervisor's own tests run trivial ones). Returns once the run ends, with
    every process gone.
    """
    start = self._start_time = time.time()
    with self._signals_handled():
      try:
        if self._node_start == 'fork':
          self._start_fork_server(commands)
        for node, argv, env in commands:
          self._children.append(self._start(node, argv, env))
        outcome = self._watch()
      finally:
        self._stop_all()
        self._stop_fork_server()
        for child in self._children:
          child.join_relay()
          child.log.close()
    outcome.wall_time = time.time() - start
    outcome.restarts = dict(self._restarts.restarts)
    return outcome

  def _loopback_key_env(self, run_ports: List[int]) -> Dict[str, str]:
    """--run_key=all: what tells each node's shim to prove the run's key
    on the run's ports, the key by its path only. LaunchError (exit 2)
    before any node starts for a key file that cannot be used."""
    try:
      loopback.run_key_of(self._run_dir)
    except ValueError as e:
      raise errors.LaunchError(str(e)) from None
    return {loopback.RUN_KEY_ENV: loopback.run_key_path(self._run_dir),
            loopback.RUN_PORTS_ENV: ','.join(map(str, run_ports))}

  def _node_env(self, node: str,
                env_overrides: Dict[str, str]) -> Dict[str, str]:
    env = process_env.node_process_env(
        node, env_overrides, run_dir=self._run_dir,
        compilation_cache=self._compilation_cache,
        pdb=self._pdb and node == self._debug_node,
        python_path=self._python_path, preload=self._preload)
    env.update(self._key_env)
    return env

  def _start_fork_server(self, commands) -> None:
    """--node_start=fork: the fork server, with the environment of the
    first node that may be forked (none: every node is exec'd). The one
    started early (forkserver.start_early) if its environment is that."""
    early, self._early_fork_server = self._early_fork_server, None
    found = forkserver.first_forkable(
        ((node, argv, self._node_env(node, overrides))
         for node, argv, overrides in commands), skip=self._debug_node)
    if found is None:
      if early is not None:
        early.stop()
      return
    argv, env = found
    self._fork_server_log = NodeLog(
        layout.log_path(self._run_dir, forkserver.ZYGOTE_NAME),
        self._node_log_max_bytes)
    self._fork_server = children.adopt_or_start_fork_server(
        early, argv, env, self._fork_server_log, self._show_output)

  def _stop_fork_server(self) -> None:
    if self._early_fork_server is not None:   # Never adopted.
      self._early_fork_server.stop()
    if self._fork_server is not None:
      self._fork_server.stop()
      self._fork_server_log.close()

  def _start(self, node: str, argv: List[str],
             env_overrides: Dict[str, str]) -> NodeProcess:
    env = self._node_env(node, env_overrides)
    env['TMPDIR'] = temp_dir = children.private_temp_dir()
    log = NodeLog(layout.log_path(self._run_dir, node),
                  self._node_log_max_bytes)
    if node == self._debug_node:
      return NodeProcess(node, children.start_in_foreground(argv, env, log),
                         log, argv, env_overrides, temp_dir=temp_dir)
    popen = None
    if self._fork_server is not None:
      why_not = forkserver.why_not_forked(env, self._fork_server.env, argv)
      if why_not:
        log.write(f'acme-launch: started by exec, not forked: {why_not}.\n')
      else:
        popen = self._fork_server.spawn(argv, env, paths.ROOT)
        if popen is None:
          popen = children.Gone()  # The fork server died: _watch says so.
    if popen is None:
      popen = children.exec_node(argv, env)
    child = NodeProcess(node, popen, log, argv, env_overrides,
                        temp_dir=temp_dir)
    if popen.stdout is None:
      return child
    child.relay_thread = threading.Thread(
        target=children.relay,
        args=(popen.stdout, log, node, self._show_output), daemon=True)
    child.relay_thread.start()
    return child

  def _watch(self) -> core.Outcome:
    while True:
      if self._stop_signal is not None:
        return self._stopped_outcome()
      if self._fork_server is not None and not self._fork_server.alive():
        return core.Outcome(
            core.EXIT_NODE_FAILED, 'node_failed',
            failed_node=forkserver.ZYGOTE_NAME,
            failed_log_tail=layout.log_tail(self._fork_server_log.path) +
            f'\n(the fork server (--node_start=fork) '
            f'{self._fork_server.how_it_ended()}; the nodes it started died '
            'with it)')
      for i, child in enumerate(self._children):
        code = child.popen.poll()
        if code is None or code == 0:
          continue
        how = core.how_it_ended(code)
        decision = self._restarts.on_death(child.node)
        if not decision.restart:
          child.join_relay()  # Its last lines, for the tail.
          return core.Outcome(core.EXIT_NODE_FAILED, 'node_failed',
                              failed_node=child.node,
                              failed_log_tail=layout.log_tail(child.log.path) +
                              f'\n(node {child.node} {how}; {decision.reason})')
        self._children[i] = self._restart(child, how, decision.attempt)
      if all(child.popen.poll() is not None for child in self._children):
        return core.Outcome(core.EXIT_OK, 'all_nodes_exited')
      if self._wall_time_exceeded():
        return core.Outcome(core.EXIT_OK, 'max_wall_time')
      if time.time() - self._disk_checked > disk_space.CHECK_EVERY_SECONDS:
        self._disk_checked = time.time()
        short = disk_space.shortage(self._run_dir, self._disk_guard_bytes)
        if short:
          # Stopping now leaves room for the checkpoints saved on stop.
          return core.Outcome(core.EXIT_NODE_FAILED, 'low_disk_space',
                              failed_log_tail=f'stopped: {short}')
      self._report()
      time.sleep(0.5)

  def _restart(self, child: NodeProcess, how: str,
               attempt: int) -> NodeProcess:
    """Starts a dead actor or evaluator again, with its restart number."""
    line = self._restart_line(child.node, how, attempt)
    print(line, flush=True)
    child.join_relay()
    child.log.write(f'\n{line}\n')
    child.log.close()
    children.kill_group(child.popen.pid)  # Anything it left behind.
    children.remove_temp_dir(child)
    env = node_env.updated(child.env_overrides, restart=attempt)
    return self._start(child.node, child.argv, env)

  def _stop_all(self) -> None:
    """SIGTERM every node; once the nodes that save state are done, kill.

    Replay, counter and learner save on SIGTERM and are given
    STOP_TIMEOUT_SECONDS. The others hold nothing to save, and an actor
    blocked inside a Reverb insert never runs its signal handler: they are
    killed as soon as the saving nodes have exited.
    """
    for child in self._children:
      if child.popen.poll() is None:
        try:
          child.popen.send_signal(signal.SIGTERM)
        except ProcessLookupError:
          pass
    saving = [c for c in self._children
              if topology.saves_on_stop(c.node)]
    deadline = time.time() + core.STOP_TIMEOUT_SECONDS
    while time.time() < deadline and any(
        c.popen.poll() is None for c in saving):
      time.sleep(0.2)
    self._kill_all()

  def _kill_all(self) -> None:
    for child in self._children:
      try:
        if child.node == self._debug_node:
          child.popen.kill()  # Its process group is the launcher's.
        else:
          children.kill_group(child.popen.pid)
      except (ProcessLookupError, PermissionError):
        pass
      child.popen.wait()
      children.remove_temp_dir(child)
