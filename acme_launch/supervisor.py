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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, TextIO

from absl import flags
import launchpad as lp
from launchpad import context as lp_context
from launchpad.nodes.python import local_multi_processing

from acme_launch import loopback
from acme_launch import program as program_lib
from acme_launch import progress as progress_lib
from acme_launch import resources
from acme_launch import rundir

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_SECONDS = 20.0
STATEFUL_GROUPS = ('replay', 'counter', 'learner')  # They save on stop.

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


@dataclasses.dataclass
class _NodeProcess:
  node: str
  popen: subprocess.Popen
  log_file: TextIO
  echo_thread: Optional[threading.Thread] = None


def _die_with_parent() -> None:
  """Runs in the child before exec: SIGKILL it if the launcher dies."""
  libc = ctypes.CDLL('libc.so.6', use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _node_commands(built: program_lib.BuiltProgram,
                   plan: resources.ResourcePlan,
                   program_stopper: Optional[Callable[[], None]] = None,
                   bind_addresses: Optional[Callable[[str, Any], None]] = None):
  """(node name, argv, env) for each node, as Launchpad's local_mp makes them.

  The Ray launcher (ray_launch.py) passes its own `program_stopper` (what
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
      argv = [interpreter, '-m', 'acme_launch.node_entry', *args]
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


def _echo(stream, log_file: TextIO, node: str) -> None:
  """Copies a child's output to its log file and, prefixed, to stdout."""
  for line in iter(stream.readline, ''):
    log_file.write(line)
    log_file.flush()
    sys.stdout.write(f'[{node}] {line}')
    sys.stdout.flush()


class Supervisor:
  """Runs one launched program to its end; see the module docstring."""

  def __init__(self, run_dir: str, show_output: bool = False,
               max_wall_time: float = 0.0,
               reporter: Optional[progress_lib.ProgressReporter] = None,
               preload: str = ''):
    self._run_dir = run_dir
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
    start = self._start_time = time.time()
    previous = {s: signal.signal(s, self._on_signal)
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
      with _program_files_in(os.path.join(self._run_dir, '.launchpad')):
        commands = list(_node_commands(built, plan))
      for node, argv, env in commands:
        self._start(node, argv, env)
      outcome = self._watch()
    finally:
      self._stop_all()
      for child in self._children:
        if child.echo_thread:
          child.echo_thread.join(timeout=5)
        child.log_file.close()
      for s, handler in previous.items():
        signal.signal(s, handler)
    outcome.wall_time = time.time() - start
    return outcome

  def _start(self, node: str, argv: List[str], env_overrides: Dict[str, str]):
    env = dict(os.environ)
    env.update(env_overrides)
    env['ACME_LAUNCH_NODE'] = node
    env['ACME_LAUNCH_RUN_DIR'] = self._run_dir
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (_REPO_ROOT, env.get('PYTHONPATH', '')) if p)
    env['PYTHONUNBUFFERED'] = '1'
    if self._preload:
      env['LD_PRELOAD'] = loopback.preload_value(env.get('LD_PRELOAD', ''),
                                                 self._preload)
    log_file = open(rundir.log_path(self._run_dir, node), 'a')
    popen = subprocess.Popen(
        argv, env=env, cwd=_REPO_ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if self._show_output else log_file,
        stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=_die_with_parent)
    child = _NodeProcess(node, popen, log_file)
    if self._show_output:
      child.echo_thread = threading.Thread(
          target=_echo, args=(popen.stdout, log_file, node), daemon=True)
      child.echo_thread.start()
    self._children.append(child)

  def _watch(self) -> Outcome:
    while True:
      if self._stop_signal is not None:
        progress = rundir.read_json(rundir.progress_path(self._run_dir), {})
        if progress.get('budget_reached'):
          return Outcome(EXIT_OK, 'budget_reached')
        if self._stop_signal == signal.SIGINT:
          return Outcome(EXIT_INTERRUPTED, 'interrupted')
        return Outcome(128 + self._stop_signal, 'terminated')
      for child in self._children:
        code = child.popen.poll()
        if code is not None and code != 0:
          how = (f'was killed by signal {-code}' if code < 0
                 else f'exited with code {code}')
          return Outcome(EXIT_NODE_FAILED, 'node_failed',
                         failed_node=child.node,
                         failed_log_tail=_tail(child.log_file.name) +
                         f'\n(node {child.node} {how})')
      if all(child.popen.poll() is not None for child in self._children):
        return Outcome(EXIT_OK, 'all_nodes_exited')
      if self._wall_time_exceeded():
        return Outcome(EXIT_OK, 'max_wall_time')
      self._report()
      time.sleep(0.5)

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
              if c.node.split('/')[0] in STATEFUL_GROUPS]
    deadline = time.time() + STOP_TIMEOUT_SECONDS
    while time.time() < deadline and any(
        c.popen.poll() is None for c in saving):
      time.sleep(0.2)
    self._kill_all()

  def _kill_all(self) -> None:
    for child in self._children:
      try:
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
    manager = lp.launch(built.program, launch_type=launch_type,
                        serialize_py_nodes=launch_type == 'test_mt')
    failure, wall_time_exceeded = '', False
    while not manager.wait_for_stop(0.5):
      self._report()
      if self._wall_time_exceeded():
        wall_time_exceeded = True
        lp.stop()
        break
      try:
        manager.check_for_thread_worker_exception()
      except Exception as e:  # pylint: disable=broad-except
        failure = f'{type(e).__name__}: {e}'
        lp.stop()  # Signals this process: the manager stops every node.
        break
    waiter = threading.Thread(target=manager.wait,
                              kwargs={'raise_error': False}, daemon=True)
    waiter.start()
    waiter.join(STOP_TIMEOUT_SECONDS)

    progress = rundir.read_json(rundir.progress_path(self._run_dir), {})
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
