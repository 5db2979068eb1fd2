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

The run ends when the step budget is reached (the steps limiter node calls
`lp.stop()`, which signals this process with SIGTERM and leaves
`budget_reached` in progress.json), when a node fails, or when the user stops it.
"""

import contextlib
import ctypes
import dataclasses
import logging
import logging.handlers
import os
import pdb as pdb_lib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags
import launchpad as lp
from launchpad import context as lp_context
from launchpad.nodes.python import local_multi_processing

import acme_launch
from acme_launch.run import disk_space
from acme_launch.run import loopback
from acme_launch.program import build as program_lib
from acme_launch.run import progress as progress_lib
from acme_launch.plan import node_env
from acme_launch.plan import resources
from acme_launch.run import restarts
from acme_launch import layout
from acme_launch.plan import topology

_REPO_ROOT = acme_launch.ROOT
_PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_SECONDS = 20.0
NODE_LOG_BACKUPS = 3   # Rotated node logs kept: log.1 ... log.3.

EXIT_OK = 0
EXIT_NODE_FAILED = 1
EXIT_INTERRUPTED = 130


@dataclasses.dataclass
class Outcome:
  exit_code: int
  reason: str                     # budget_reached, node_failed, interrupted...
  failed_node: str = ''
  failed_log_tail: str = ''
  wall_time: float = 0.0
  restarts: Dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _NodeProcess:
  node: str
  popen: subprocess.Popen
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


def _die_with_parent() -> None:
  """Runs in the child before exec: SIGKILL it if the launcher dies."""
  libc = ctypes.CDLL('libc.so.6', use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _node_commands(built: program_lib.BuiltProgram,
                   plan: resources.ResourcePlan,
                   program_stopper: Optional[Callable[[], None]] = None,
                   bind_addresses: Optional[Callable[[str, Any], None]] = None):
  """(node name, argv, env) for each node, as Launchpad's local_mp makes them.

  The Ray launcher (run/ray/launch.py) passes its own `program_stopper` (what
  lp.stop() calls in a node) and `bind_addresses(node name, lp node)`, which
  gives the node's servers their cluster addresses instead of localhost.
  """
  program = built.program
  env_by_label = plan.env_by_label()
  for label, lp_nodes in program.groups.items():
    launch_config = local_multi_processing.PythonProcess(
        env=env_by_label.get(label, {}))
    for node in lp_nodes:
      node._initialize_context(  # pylint: disable=protected-access
          lp_context.LaunchType.LOCAL_MULTI_PROCESSING,
          launch_config=launch_config)
      if program_stopper is not None:
        node.launch_context.initialize(
            lp_context.LaunchType.LOCAL_MULTI_PROCESSING, launch_config,
            program_stopper)
  for label, lp_nodes in program.groups.items():
    for node in lp_nodes:
      for handle in node.input_handles:
        handle.connect(node, label)
  for label, lp_nodes in program.groups.items():
    for name, node in zip(built.nodes_by_label[label], lp_nodes):
      if bind_addresses is None:
        node.bind_addresses()
      else:
        bind_addresses(name, node)

  for label, lp_nodes in program.groups.items():
    commands = lp_nodes[0].to_executables(lp_nodes, label,
                                          lp_nodes[0].launch_context)
    for task_id, command in enumerate(commands):
      interpreter, _entry_script, *args = command.command_as_list
      argv = [interpreter, '-m', 'acme_launch.node.entry', *args]
      yield built.nodes_by_label[label][task_id], argv, dict(command.env_overrides)


@contextlib.contextmanager
def _program_files_in(directory: str):
  """Launchpad's pickled program (job.pkl), in `directory` (made 0700).

  Launchpad writes it into `tempfile.mkdtemp()` (and removes it at exit):
  under the run directory it is as private as the run, and what a launcher
  killed with -9 leaves goes at the next launch on the run directory (which
  holds its lock) instead of staying in the shared temp folder.
  """
  shutil.rmtree(directory, ignore_errors=True)
  os.makedirs(directory, mode=0o700, exist_ok=True)
  previous, tempfile.tempdir = tempfile.tempdir, directory
  try:
    yield
  finally:
    tempfile.tempdir = previous


def _tail(path: str, lines: int = 20) -> str:
  try:
    with open(path, errors='replace') as f:
      return ''.join(f.readlines()[-lines:])
  except OSError:
    return ''


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


class Supervisor:
  """Runs one launched program to its end; see the module docstring."""

  def __init__(self, run_dir: str, show_output: bool = False,
               max_wall_time: float = 0.0,
               reporter: Optional[progress_lib.ProgressReporter] = None,
               preload: str = '', debug_node: str = '', pdb: bool = False,
               max_node_restarts: int = 0,
               node_log_max_bytes: int = 20 * 2**20,
               disk_guard_bytes: int = 0):
    self._run_dir = run_dir
    self._disk_guard_bytes = disk_guard_bytes
    self._disk_checked = 0.0
    self._restarts = restarts.RestartPolicy(max_node_restarts)
    self._node_log_max_bytes = node_log_max_bytes
    self._debug_node = debug_node  # Runs in the foreground of this terminal.
    self._pdb = pdb
    self._preload = preload  # The loopback shim for every node process.
    self._show_output = show_output
    self._max_wall_time = max_wall_time
    self._reporter = reporter
    self._start_time = time.time()
    self._stop_signal: Optional[int] = None
    self._interrupts = 0
    self._children: List[_NodeProcess] = []

  # Signals ---------------------------------------------------------------

  def _on_signal(self, signum, frame) -> None:
    del frame
    if signum == signal.SIGINT:
      self._interrupts += 1
      if self._interrupts >= 2:
        print('acme-launch: second Ctrl-C: killing every node now.', flush=True)
        self._kill_all()
        os._exit(EXIT_INTERRUPTED)  # pylint: disable=protected-access
      print('acme-launch: stopping (checkpoints are being saved); '
            'Ctrl-C again to kill.', flush=True)
    if self._stop_signal is None:
      self._stop_signal = signum

  # local_mp --------------------------------------------------------------

  def _wall_time_exceeded(self) -> bool:
    return bool(self._max_wall_time and
                time.time() - self._start_time > self._max_wall_time)

  def _report(self) -> None:
    if self._reporter is not None:
      self._reporter.update()

  def run_multiprocess(self, built: program_lib.BuiltProgram,
                       plan: resources.ResourcePlan) -> Outcome:
    with _program_files_in(os.path.join(self._run_dir, '.launchpad')):
      commands = list(_node_commands(built, plan))
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
      for node, argv, env in commands:
        self._children.append(self._start(node, argv, env))
      outcome = self._watch()
    finally:
      self._stop_all()
      for child in self._children:
        if child.relay_thread:
          child.relay_thread.join(timeout=5)
        child.log.close()
      for s, handler in previous.items():
        signal.signal(s, handler)
    outcome.wall_time = time.time() - start
    outcome.restarts = dict(self._restarts.restarts)
    return outcome

  def _start(self, node: str, argv: List[str],
             env_overrides: Dict[str, str]) -> _NodeProcess:
    env = node_env.updated({**os.environ, **env_overrides}, node=node,
                           run_dir=self._run_dir,
                           pdb=self._pdb and node == self._debug_node)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (_REPO_ROOT, env.get('PYTHONPATH', '')) if p)
    env['PYTHONUNBUFFERED'] = '1'
    if self._preload:
      env['LD_PRELOAD'] = loopback.preload_value(env.get('LD_PRELOAD', ''),
                                                 self._preload)
    log = NodeLog(layout.log_path(self._run_dir, node),
                  self._node_log_max_bytes)
    if node == self._debug_node:
      return _NodeProcess(node, self._start_in_foreground(argv, env, log), log,
                          argv, env_overrides)
    popen = subprocess.Popen(
        argv, env=env, cwd=_REPO_ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors='replace', start_new_session=True, preexec_fn=_die_with_parent)
    child = _NodeProcess(node, popen, log, argv, env_overrides)
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
                            preexec_fn=_die_with_parent)

  def _watch(self) -> Outcome:
    while True:
      if self._stop_signal is not None:
        progress = layout.read_json(layout.progress_path(self._run_dir), {})
        if progress.get('budget_reached'):
          return Outcome(EXIT_OK, 'budget_reached')
        if self._stop_signal == signal.SIGINT:
          return Outcome(EXIT_INTERRUPTED, 'interrupted')
        return Outcome(128 + self._stop_signal, 'terminated')
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
                         failed_log_tail=_tail(child.log.path) +
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
    try:
      os.killpg(child.popen.pid, signal.SIGKILL)  # Anything it left behind.
    except (ProcessLookupError, PermissionError):
      pass
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
          os.killpg(child.popen.pid, signal.SIGKILL)
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
      except Exception as e:  # pylint: disable=broad-except
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
