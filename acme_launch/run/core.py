"""What every launch type's supervisor shares: outcome, signals, node commands.

The local_mp supervisor (local_mp/) runs each node's command as a child
process; the Ray supervisor (ray/launch.py) runs the same commands on cluster
hosts. Both turn the program into Launchpad's per-node commands here, keep
Launchpad's pickled program in the run directory, stop on the same signals
and wall time, end with the same outcomes and decide restarts with one policy
(restarts.py). The thread types (threads.py) share the wall time and progress.
"""

import contextlib
import dataclasses
import os
import shutil
import signal
import tempfile
import time
from typing import Any, Callable, Dict, Optional, Sequence

from launchpad import context as lp_context
from launchpad.nodes.python import local_multi_processing

from acme_launch import layout
from acme_launch.plan import resources
from acme_launch.program import build as program_lib
from acme_launch.run import progress as progress_lib
from acme_launch.run import restarts

STOP_TIMEOUT_SECONDS = 20.0
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


def node_commands(built: program_lib.BuiltProgram,
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
      node._initialize_context(
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
def program_files_in(directory: str):
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


def how_it_ended(code: int) -> str:
  """A node process's non-zero exit status, as the launcher's lines say it."""
  return (f'was killed by signal {-code}' if code < 0
          else f'exited with code {code}')


class SupervisorCore:
  """Signals, wall time, progress and the restart policy of one run.

  A subclass starts the nodes, watches them and implements `_kill_all`.
  """

  def __init__(self, run_dir: str, show_output: bool = False,
               max_wall_time: float = 0.0,
               reporter: Optional[progress_lib.ProgressReporter] = None,
               max_node_restarts: int = 0, python_path: Sequence[str] = (),
               compilation_cache: str = '', post_mortem_node: str = ''):
    self._run_dir = run_dir
    # JAX's persistent compilation cache for every node ('': none).
    self._compilation_cache = compilation_cache
    # Folders of the user's code (the config file's): first on every node
    # process's PYTHONPATH, before the package's own root.
    self._python_path = tuple(python_path)
    self._restarts = restarts.RestartPolicy(max_node_restarts,
                                            post_mortem_node)
    self._show_output = show_output
    self._max_wall_time = max_wall_time
    self._reporter = reporter
    self._start_time = time.time()
    self._stop_signal: Optional[int] = None
    self._interrupts = 0

  # Signals ---------------------------------------------------------------

  @contextlib.contextmanager
  def _signals_handled(self):
    """SIGINT and SIGTERM stop the run (_on_signal) while it lasts."""
    previous = {s: signal.signal(s, self._on_signal)
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
      yield
    finally:
      for s, handler in previous.items():
        signal.signal(s, handler)

  def _on_signal(self, signum, frame) -> None:
    del frame
    if signum == signal.SIGINT:
      self._interrupts += 1
      if self._interrupts >= 2:
        print('acme-launch: second Ctrl-C: killing every node now.', flush=True)
        self._kill_all()
        os._exit(EXIT_INTERRUPTED)
      print('acme-launch: stopping (checkpoints are being saved); '
            'Ctrl-C again to kill.', flush=True)
    if self._stop_signal is None:
      self._stop_signal = signum

  def _stopped_outcome(self) -> Outcome:
    """The run's end after a signal: the budget's lp.stop() (SIGTERM with
    budget_reached in progress.json), Ctrl-C, or another SIGTERM."""
    progress = layout.read_json(layout.progress_path(self._run_dir), {})
    if progress.get('budget_reached'):
      return Outcome(EXIT_OK, 'budget_reached')
    if self._stop_signal == signal.SIGINT:
      return Outcome(EXIT_INTERRUPTED, 'interrupted')
    return Outcome(128 + self._stop_signal, 'terminated')

  def _restart_line(self, node: str, how: str, attempt: int) -> str:
    """What the launcher prints, and the node's log gets, on a restart."""
    return (f'acme-launch: node {node} {how}; restarting it ({attempt} of at '
            f'most {self._restarts.max_restarts})')

  def _wall_time_exceeded(self) -> bool:
    return bool(self._max_wall_time and
                time.time() - self._start_time > self._max_wall_time)

  def _report(self) -> None:
    if self._reporter is not None:
      self._reporter.update()

  def _kill_all(self) -> None:
    raise NotImplementedError
