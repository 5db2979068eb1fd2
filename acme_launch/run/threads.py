"""`local_mt` and `test_mt`: every node a thread of the launcher (debugging).

Launchpad runs the threads (`lp.launch`); this module only watches them as
the other launch types' supervisors watch processes: progress, wall time, a
node thread's exception (with --pdb, its post-mortem here), the budget. It
shares no process handling with local_mp, hence a module of its own.
"""

import os
import pdb as pdb_lib
import signal
import sys
import threading
import time

from absl import flags
import launchpad as lp

from acme_launch import layout
from acme_launch.program import build as program_lib
from acme_launch.run import core


def _stop_thread_program() -> None:
  """Asks Launchpad's worker manager to stop every node thread.

  lp.stop() needs a node's Launchpad context, which the launcher's main
  thread lacks (it raised AssertionError there); the manager's own SIGTERM
  handler is what lp.stop() would reach.
  """
  os.kill(os.getpid(), signal.SIGTERM)


def _node_output_to(log_path: str) -> None:
  """Node threads' output (C++ and logging) into one log file.

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


class ThreadSupervisor(core.SupervisorCore):
  """Runs one program's nodes as threads of this process to its end."""

  def __init__(self, run_dir: str, pdb: bool = False, **kwargs):
    super().__init__(run_dir, **kwargs)
    self._pdb = pdb  # A node thread's exception: its post-mortem here.

  def run_threads(self, built: program_lib.BuiltProgram,
                  launch_type: str) -> core.Outcome:
    """All nodes as threads of this process.

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
    waiter.join(core.STOP_TIMEOUT_SECONDS)

    progress = layout.read_json(layout.progress_path(self._run_dir), {})
    if failure:
      outcome = core.Outcome(core.EXIT_NODE_FAILED, 'node_failed',
                             failed_node='a node thread',
                             failed_log_tail=failure)
    elif progress.get('budget_reached'):
      outcome = core.Outcome(core.EXIT_OK, 'budget_reached')
    elif wall_time_exceeded:
      outcome = core.Outcome(core.EXIT_OK, 'max_wall_time')
    else:
      outcome = core.Outcome(core.EXIT_INTERRUPTED, 'interrupted')
    outcome.wall_time = time.time() - start
    return outcome
