"""One node's child process on this host: how it starts, where its output
goes, how it is killed.

Kept apart from the supervisor's decisions (launch.py) because these are
the parts a supervisor of another kind would not share: a node started by
exec (subprocess), forked from the fork server (run/forkserver.py), or in
the foreground of this terminal (--debug_node); its output relayed line by
line into a capped log file; its process group killed on stop.
"""

import dataclasses
import logging
import logging.handlers
import os
import shutil
import signal
import subprocess
import sys
import threading
from typing import Dict, List, Optional

from acme_launch import paths
from acme_launch import safe_dirs
from acme_launch.run import forkserver

NODE_LOG_BACKUPS = 3   # Rotated node logs kept: log.1 ... log.3.


class _NoFollowRotatingHandler(logging.handlers.RotatingFileHandler):
  """logging's rotating file, opened (and reopened after each rotation)
  private and never through a symbolic link: OSError (ELOOP) if the log is
  one. Rotation renames, which replaces a link rather than following it."""

  def _open(self):
    return os.fdopen(safe_dirs.open_append_nofollow(self.baseFilename),
                     self.mode, encoding=self.encoding, errors=self.errors)


class NodeLog:
  """A node's log file, capped: `max_bytes` per file, `backups` older ones.

  Node output reaches it through the launcher (see relay), so a node that
  writes without end fills at most (backups + 1) x max_bytes of disk;
  logging's RotatingFileHandler does the rotating (log -> log.1 -> ...).
  """

  def __init__(self, path: str, max_bytes: int, backups: int = NODE_LOG_BACKUPS):
    self.path = path
    self._handler = _NoFollowRotatingHandler(
        path, maxBytes=max_bytes, backupCount=backups)
    self._handler.terminator = ''  # Lines keep their own newline.
    self._handler.setFormatter(logging.Formatter('%(message)s'))
    self._lock = threading.Lock()

  def write(self, text: str) -> None:
    with self._lock:
      self._handler.emit(logging.makeLogRecord({'msg': text, 'args': None}))

  def close(self) -> None:
    self._handler.close()


@dataclasses.dataclass
class NodeProcess:
  """A started node: its process, its log, and what starts it again."""
  node: str
  popen: subprocess.Popen   # Or a forkserver.ForkedProcess, or a Gone.
  log: NodeLog
  argv: List[str]
  env_overrides: Dict[str, str]
  relay_thread: Optional[threading.Thread] = None
  temp_dir: str = ''  # Its TMPDIR (private_temp_dir), '' for none.

  def join_relay(self) -> None:
    """Waits for the node's last lines to reach its log."""
    if self.relay_thread:
      self.relay_thread.join(timeout=5)


class Gone:
  """A node the dead fork server could not start: an exited process."""
  pid = 0       # No process group to kill (kill_group skips it).
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


def private_temp_dir() -> str:
  """A new private folder (0700) in this host's temp folder: a node's
  TMPDIR, removed by remove_temp_dir once its process is gone.

  A node process ends without Python's exit handlers (os._exit in a forked
  one, SIGKILL on stop), so what libraries put in the temp folder and meant
  to delete at exit would stay (TensorFlow's AutoGraph writes a source file
  for every function it converts, the checkpointer's among them).
  """
  return safe_dirs.private_temp_folder('acme-launch-node-',
                                       "node's temp folder")


def remove_temp_dir(child: NodeProcess) -> None:
  if child.temp_dir:
    shutil.rmtree(child.temp_dir, ignore_errors=True)
    child.temp_dir = ''


def kill_group(pid: int) -> None:
  """SIGKILLs the process group (session) a node leads, if it is there."""
  if pid <= 0:
    return  # killpg(0) would be the launcher's own group.
  try:
    os.killpg(pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


def relay(stream, log: NodeLog, node: str, echo: bool) -> None:
  """Copies a child's output to its log and, with --show_output, prefixed
  with its node to this terminal."""
  for line in iter(stream.readline, ''):
    log.write(line)
    if echo:
      sys.stdout.write(f'[{node}] {line}')
      sys.stdout.flush()


def exec_node(argv: List[str], env: Dict[str, str]) -> subprocess.Popen:
  """A node started by exec: its own session, output piped to the relay,
  dying with the launcher (PR_SET_PDEATHSIG)."""
  return subprocess.Popen(
      argv, env=env, cwd=paths.ROOT, stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      errors='replace', start_new_session=True,
      preexec_fn=forkserver.die_with_parent)


def start_in_foreground(argv: List[str], env: Dict[str, str],
                        log: NodeLog) -> subprocess.Popen:
  """--debug_node: the node shares this terminal, stdin and process group.

  breakpoint() in its code stops at a prompt here, and Ctrl-C reaches it
  with the launcher (it stops as on SIGTERM). Its output is not in its log.
  """
  log.write('acme-launch: this node ran in the launcher\'s terminal '
            '(--debug_node); its output went there.\n')
  return subprocess.Popen(argv, env=env, cwd=paths.ROOT,
                          preexec_fn=forkserver.die_with_parent)


def adopt_or_start_fork_server(
    early: Optional[forkserver.ForkServer], argv: List[str],
    env: Dict[str, str], log: NodeLog, show_output: bool
) -> forkserver.ForkServer:
  """--node_start=fork: the fork server for the first forkable node's
  `argv` and `env`; the one started early (forkserver.start_early) if its
  environment is that, else a new one (the early one stopped)."""
  relay_to_log = lambda stream: relay(stream, log, forkserver.ZYGOTE_NAME,
                                      show_output)
  if (early is not None and early.alive() and early.python == argv[0] and
      not forkserver.why_not_forked(env, early.env, argv)):
    log.write('acme-launch: fork server started while the launcher '
              'prepared the run.\n')
    early.relay_output(relay_to_log)
    return early
  if early is not None:
    early.stop()
    log.write('acme-launch: the fork server started early had another '
              'environment than the plan\'s first node to fork: started '
              'anew.\n')
  return forkserver.ForkServer(env, paths.ROOT, argv[0], relay=relay_to_log)
