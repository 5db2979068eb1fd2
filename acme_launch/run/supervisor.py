"""Starts the program's processes and watches them until the run ends.

For `local_mp` Launchpad turns the program into one command per node, as its
own local launcher does; this module then runs those commands itself instead
of handing them to a terminal (gnome-terminal, tmux, xterm, or Launchpad's
`output_to_files`, which writes to one shared temp folder). That gives:
  - one log file per node in the run directory (optionally echoed, prefixed
    with the node's name, to this terminal);
  - fail-fast: a node that exits non-zero or dies stops the whole run, and the
    launcher names it and shows the end of its log;
  - no orphans: each child dies with the launcher (PR_SET_PDEATHSIG) and is
    killed by process group on stop.
`local_mt` and `test_mt` run every node as a thread of this process through
`lp.launch`.

The run ends when the step budget is reached (the counter node's steps limiter calls
`lp.stop()`, which signals this process with SIGTERM and leaves
`budget_reached` in progress.json), when a node fails, or when the user stops it.
"""

import dataclasses
import logging
import logging.handlers
import os
import pdb as pdb_lib
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags
import launchpad as lp

from acme_launch import paths
from acme_launch.run import core
from acme_launch.run import disk_space
from acme_launch.run import forkserver
from acme_launch.run import process_env
from acme_launch.program import build as program_lib
from acme_launch.run import progress as progress_lib
from acme_launch.plan import node_env
from acme_launch.plan import resources
from acme_launch import layout
from acme_launch.plan import topology

_REPO_ROOT = paths.ROOT
NODE_LOG_BACKUPS = 3   # Rotated node logs kept: log.1 ... log.3.

# What every supervisor returns, also named here.
Outcome = core.Outcome
EXIT_OK, EXIT_NODE_FAILED, EXIT_INTERRUPTED = (
    core.EXIT_OK, core.EXIT_NODE_FAILED, core.EXIT_INTERRUPTED)
STOP_TIMEOUT_SECONDS = core.STOP_TIMEOUT_SECONDS

@dataclasses.dataclass
class _NodeProcess:
  node: str
  popen: subprocess.Popen   # Or a forkserver.ForkedProcess.
  log: 'NodeLog'
  argv: List[str]
  env_overrides: Dict[str, str]
  relay_thread: Optional[threading.Thread] = None


class NodeLog:
  """A node's log file, capped: `max_bytes` per file, `backups` older ones.

  Node output reaches it through the launcher (see _relay), so a node that
  writes without end fills at most (backups + 1) x max_bytes of disk;
  logging's RotatingFileHandler does the rotating (log -> log.1 -> ...).
  """

  def __init__(self, path: str, max_bytes: int, backups: int = NODE_LOG_BACKUPS):
    self.path = path
    self._handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=backups)
    self._handler.terminator = ''  # Lines keep their own newline.
    self._handler.setFormatter(logging.Formatter('%(message)s'))
    self._lock = threading.Lock()

  def write(self, text: str) -> None:
    with self._lock:
      self._handler.emit(logging.makeLogRecord({'msg': text, 'args': None}))

  def close(self) -> None:
    self._handler.close()


class _Gone:
  """A node the dead fork server could not start: an exited process."""
  pid = 0       # No process group to kill (_kill_group skips it).
  stdout = None
  returncode = -signal.SIGKILL

  def poll(self) -> int:
    return self.returncode

  def wait(self, timeout: Optional[float] = None) -> int:
    del timeout
    return self.returncode

  def send_signal(self, sig: int) -> None:
    del sig

  def kill(self) -> None:
    pass


def _kill_group(pid: int) -> None:
  """SIGKILLs the process group (session) a node leads, if it is there."""
  if pid <= 0:
    return  # killpg(0) would be the launcher's own group.
  try:
    os.killpg(pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


def _stop_thread_program() -> None:
  """Asks Launchpad's worker manager to stop every node thread.

  lp.stop() needs a node's Launchpad context, which the launcher's main
  thread lacks (it raised AssertionError there); the manager's own SIGTERM
  handler is what lp.stop() would reach.
  """
  os.kill(os.getpid(), signal.SIGTERM)


def _node_output_to(log_path: str) -> None:
  """local_mt: node threads' output (C++ and logging) into one log file.

  The process's file descriptors 1 and 2 go to `log_path`, which is where
  Reverb's C++ log lines and absl's handler (bound to the original stderr
  object) write; sys.stdout and sys.stderr become new objects on the
  terminal, so the launcher's own lines, prints and a debugger stay here.
  """
  sys.stdout.flush()
  sys.stderr.flush()
  terminal_out, terminal_err = os.dup(1), os.dup(2)
  log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
  os.dup2(log_fd, 1)
  os.dup2(log_fd, 2)
  os.close(log_fd)
  sys.stdout = os.fdopen(terminal_out, 'w', buffering=1)
  sys.stderr = os.fdopen(terminal_err, 'w', buffering=1)


def _relay(stream, log: NodeLog, node: str, echo: bool) -> None:
  """Copies a child's output to its log and, with --show_output, prefixed
  with its node to this terminal."""
  for line in iter(stream.readline, ''):
    log.write(line)
    if echo:
      sys.stdout.write(f'[{node}] {line}')
      sys.stdout.flush()


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
               early_fork_server: Optional[forkserver.ForkServer] = None):
    super().__init__(run_dir, show_output=show_output,
                     max_wall_time=max_wall_time, reporter=reporter,
                     max_node_restarts=max_node_restarts,
                     python_path=python_path,
                     compilation_cache=compilation_cache)
    self._disk_guard_bytes = disk_guard_bytes
    self._disk_checked = 0.0
    self._node_log_max_bytes = node_log_max_bytes
    self._debug_node = debug_node  # Runs in the foreground of this terminal.
    self._pdb = pdb
    self._preload = preload  # The loopback shim for every node process.
    self._children: List[_NodeProcess] = []
    # --node_start=fork: node processes forked from one fork server.
    self._node_start = node_start
    self._fork_server: Optional[forkserver.ForkServer] = None
    self._fork_server_log: Optional[NodeLog] = None
    # Started by the launcher before the program was built: adopted or
    # stopped by _start_fork_server.
    self._early_fork_server = early_fork_server

  # local_mp --------------------------------------------------------------

  def run_multiprocess(self, built: program_lib.BuiltProgram,
                       plan: resources.ResourcePlan) -> Outcome:
    with core.program_files_in(os.path.join(self._run_dir, '.launchpad')):
      commands = list(core.node_commands(built, plan))
    return self.run_commands(commands)

  def run_commands(self, commands: Sequence[Tuple[str, List[str],
                                                  Dict[str, str]]]) -> Outcome:
    """Starts one process per (node, argv, env overrides) and watches them.

    The commands are Launchpad's for the program's nodes; any will do (the
    supervisor's own tests run trivial ones). Returns once the run ends, with
    every process gone.
    """
    start = self._start_time = time.time()
    previous = {s: signal.signal(s, self._on_signal)
                for s in (signal.SIGINT, signal.SIGTERM)}
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
        if child.relay_thread:
          child.relay_thread.join(timeout=5)
        child.log.close()
      for s, handler in previous.items():
        signal.signal(s, handler)
    outcome.wall_time = time.time() - start
    outcome.restarts = dict(self._restarts.restarts)
    return outcome

  def _node_env(self, node: str,
                env_overrides: Dict[str, str]) -> Dict[str, str]:
    return process_env.node_process_env(
        node, env_overrides, run_dir=self._run_dir,
        compilation_cache=self._compilation_cache,
        pdb=self._pdb and node == self._debug_node,
        python_path=self._python_path, preload=self._preload)

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
    log = self._fork_server_log
    relay = lambda stream: _relay(stream, log, forkserver.ZYGOTE_NAME,
                                  self._show_output)
    if (early is not None and early.alive() and early.python == argv[0] and
        not forkserver.why_not_forked(env, early.env, argv)):
      log.write('acme-launch: fork server started while the launcher '
                'prepared the run.\n')
      early.relay_output(relay)
      self._fork_server = early
      return
    if early is not None:
      early.stop()
      log.write('acme-launch: the fork server started early had another '
                'environment than the plan\'s first node to fork: started '
                'anew.\n')
    self._fork_server = forkserver.ForkServer(env, _REPO_ROOT, argv[0],
                                              relay=relay)

  def _stop_fork_server(self) -> None:
    if self._early_fork_server is not None:   # Never adopted.
      self._early_fork_server.stop()
    if self._fork_server is not None:
      self._fork_server.stop()
      self._fork_server_log.close()

  def _start(self, node: str, argv: List[str],
             env_overrides: Dict[str, str]) -> _NodeProcess:
    env = self._node_env(node, env_overrides)
    log = NodeLog(layout.log_path(self._run_dir, node),
                  self._node_log_max_bytes)
    if node == self._debug_node:
      return _NodeProcess(node, self._start_in_foreground(argv, env, log), log,
                          argv, env_overrides)
    popen = None
    if self._fork_server is not None:
      why_not = forkserver.why_not_forked(env, self._fork_server.env, argv)
      if why_not:
        log.write(f'acme-launch: started by exec, not forked: {why_not}.\n')
      else:
        popen = self._fork_server.spawn(argv, env, _REPO_ROOT)
        if popen is None:
          popen = _Gone()  # The fork server died: _watch says so.
    if popen is None:
      popen = subprocess.Popen(
          argv, env=env, cwd=_REPO_ROOT, stdin=subprocess.DEVNULL,
          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
          errors='replace', start_new_session=True,
          preexec_fn=forkserver.die_with_parent)
    child = _NodeProcess(node, popen, log, argv, env_overrides)
    if popen.stdout is None:
      return child
    child.relay_thread = threading.Thread(
        target=_relay, args=(popen.stdout, log, node, self._show_output),
        daemon=True)
    child.relay_thread.start()
    return child

  def _start_in_foreground(self, argv: List[str], env: Dict[str, str],
                           log: NodeLog) -> subprocess.Popen:
    """--debug_node: the node shares this terminal, stdin and process group.

    breakpoint() in its code stops at a prompt here, and Ctrl-C reaches it
    with the launcher (it stops as on SIGTERM). Its output is not in its log.
    """
    log.write('acme-launch: this node ran in the launcher\'s terminal '
              '(--debug_node); its output went there.\n')
    return subprocess.Popen(argv, env=env, cwd=_REPO_ROOT,
                            preexec_fn=forkserver.die_with_parent)

  def _watch(self) -> Outcome:
    while True:
      if self._stop_signal is not None:
        progress = layout.read_json(layout.progress_path(self._run_dir), {})
        if progress.get('budget_reached'):
          return Outcome(EXIT_OK, 'budget_reached')
        if self._stop_signal == signal.SIGINT:
          return Outcome(EXIT_INTERRUPTED, 'interrupted')
        return Outcome(128 + self._stop_signal, 'terminated')
      if self._fork_server is not None and not self._fork_server.alive():
        return Outcome(
            EXIT_NODE_FAILED, 'node_failed', failed_node=forkserver.ZYGOTE_NAME,
            failed_log_tail=core.log_tail(self._fork_server_log.path) +
            f'\n(the fork server (--node_start=fork) '
            f'{self._fork_server.how_it_ended()}; the nodes it started died '
            'with it)')
      for i, child in enumerate(self._children):
        code = child.popen.poll()
        if code is None or code == 0:
          continue
        how = (f'was killed by signal {-code}' if code < 0
               else f'exited with code {code}')
        decision = self._restarts.on_death(child.node)
        if not decision.restart:
          if child.relay_thread:
            child.relay_thread.join(timeout=5)  # Its last lines, for the tail.
          return Outcome(EXIT_NODE_FAILED, 'node_failed',
                         failed_node=child.node,
                         failed_log_tail=core.log_tail(child.log.path) +
                         f'\n(node {child.node} {how}; {decision.reason})')
        self._children[i] = self._restart(child, how, decision.attempt)
      if all(child.popen.poll() is not None for child in self._children):
        return Outcome(EXIT_OK, 'all_nodes_exited')
      if self._wall_time_exceeded():
        return Outcome(EXIT_OK, 'max_wall_time')
      if time.time() - self._disk_checked > disk_space.CHECK_EVERY_SECONDS:
        self._disk_checked = time.time()
        short = disk_space.shortage(self._run_dir, self._disk_guard_bytes)
        if short:
          # Stopping now leaves room for the checkpoints saved on stop.
          return Outcome(EXIT_NODE_FAILED, 'low_disk_space',
                         failed_log_tail=f'stopped: {short}')
      self._report()
      time.sleep(0.5)

  def _restart(self, child: _NodeProcess, how: str,
               attempt: int) -> _NodeProcess:
    """Starts a dead actor or evaluator again, with its restart number."""
    line = (f'acme-launch: node {child.node} {how}; restarting it ({attempt} '
            f'of at most {self._restarts.max_restarts})')
    print(line, flush=True)
    if child.relay_thread:
      child.relay_thread.join(timeout=5)
    child.log.write(f'\n{line}\n')
    child.log.close()
    _kill_group(child.popen.pid)  # Anything it left behind.
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
    deadline = time.time() + STOP_TIMEOUT_SECONDS
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
          _kill_group(child.popen.pid)
      except (ProcessLookupError, PermissionError):
        pass
      child.popen.wait()

  # local_mt / test_mt ----------------------------------------------------

  def run_threads(self, built: program_lib.BuiltProgram,
                  launch_type: str) -> Outcome:
    """All nodes as threads of this process (debugging).

    Launchpad's worker manager handles Ctrl-C and SIGTERM here. A thread
    blocked in C (a learner waiting on Reverb) cannot be interrupted, so the
    manager is told never to kill the process; the run ends once every
    thread finished or STOP_TIMEOUT_SECONDS passed, and the caller then exits
    the process (the node threads are daemons).
    """
    start = self._start_time = time.time()
    flags.FLAGS.lp_termination_notice_secs = -1
    if not self._show_output:
      _node_output_to(layout.log_path(self._run_dir, 'threads'))
    manager = lp.launch(built.program, launch_type=launch_type,
                        serialize_py_nodes=launch_type == 'test_mt')
    failure, wall_time_exceeded = '', False
    while not manager.wait_for_stop(0.5):
      self._report()
      if self._wall_time_exceeded():
        wall_time_exceeded = True
        _stop_thread_program()
        break
      try:
        manager.check_for_thread_worker_exception()
      except Exception as e:
        failure = f'{type(e).__name__}: {e}'
        if self._pdb:
          # The node thread's own frames: `up`/`down` walk its stack while
          # the other nodes keep running; quitting the debugger ends the run.
          print(f'acme-launch: a node thread raised {failure}; post-mortem '
                'debugger (q ends it, and with it the run)', flush=True)
          pdb_lib.post_mortem(e.__traceback__)
        _stop_thread_program()
        break
    waiter = threading.Thread(target=manager.wait,
                              kwargs={'raise_error': False}, daemon=True)
    waiter.start()
    waiter.join(STOP_TIMEOUT_SECONDS)

    progress = layout.read_json(layout.progress_path(self._run_dir), {})
    if failure:
      outcome = Outcome(EXIT_NODE_FAILED, 'node_failed',
                        failed_node='a node thread', failed_log_tail=failure)
    elif progress.get('budget_reached'):
      outcome = Outcome(EXIT_OK, 'budget_reached')
    elif wall_time_exceeded:
      outcome = Outcome(EXIT_OK, 'max_wall_time')
    else:
      outcome = Outcome(EXIT_INTERRUPTED, 'interrupted')
    outcome.wall_time = time.time() - start
    return outcome
