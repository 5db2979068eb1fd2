"""The supervisor's side of `--node_start=fork` (node/forkserver.py is the
fork server itself): starting it, asking it for node processes, and a
Popen-like handle for each.

The fork server is a child of the launcher; the nodes it forks are its
children, not the launcher's, so their exit statuses come over the socket
(the server waits for them) and a reader thread here records them.

A node is forked only when that gives the same process as exec would:
  - it sees no GPU (CUDA_VISIBLE_DEVICES empty): a GPU node's JAX and TF
    settings are left to a fresh process;
  - its values of the variables read when TF, JAX and Python start (names
    starting with IMPORT_TIME_PREFIXES) are the fork server's own, and so
    are those the loopback shim reads when it loads (loopback.SHIM_LOAD_ENV:
    a forked node's shim is its fork server's, loaded once).
  - its command is `python -m acme_launch.node.entry ...`, which the fork
    server runs in the child (the supervisor's tests run other commands).
Every other node (and --debug_node's) is started by exec as usual.

The fork server's own imports take seconds, so the launcher starts it early
(`start_early`, from act.py as soon as the plan is made), with the
environment the plan gives the first node that may be forked, while it
does its own imports and builds the program. The supervisor then adopts it
if the real plan gives that node the same environment, else stops it and
starts one with the right one. Until adopted its output waits in its pipe,
and a refused input stops it before the launcher prints why: it writes
nothing.
"""

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import (Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Tuple)

from acme_launch import credentials
from acme_launch.plan import node_env
from acme_launch.run import loopback

# Variables read at import or interpreter start, not later: JAX copies
# JAX_* into its config when imported, TF's C++ library reads TF_* (log
# level) when loaded, the interpreter PYTHON*, the loader LD_*, and the
# OpenBLAS that numpy loads reads OMP_NUM_THREADS and OPENBLAS_NUM_THREADS
# (MKL_*: the same, where numpy uses MKL).
IMPORT_TIME_PREFIXES = ('JAX_', 'TF_', 'PYTHON', 'LD_', 'OMP_', 'OPENBLAS_',
                        'MKL_')
ZYGOTE_NAME = 'forkserver'   # Its log: logs/forkserver.log.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
  """Runs in a child before exec: SIGKILL it if the launcher dies."""
  libc = ctypes.CDLL('libc.so.6', use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def server_env(node_env_: Mapping[str, str]) -> Dict[str, str]:
  """The fork server's environment: a node's, without our per-node
  ACME_LAUNCH_* settings and without the credentials that node's pass_env
  kept (credentials.py): each forked node gets its own in its request."""
  return {k: v for k, v in node_env_.items()
          if (not k.startswith(node_env.PREFIX) or k in loopback.SHIM_LOAD_ENV)
          and not credentials.is_withheld(k, v)}


ENTRY_ARGV = ['-m', 'acme_launch.node.entry']   # After the interpreter.


def why_not_forked(env: Mapping[str, str], server: Mapping[str, str],
                   argv: Sequence[str] = ('python', *ENTRY_ARGV)) -> str:
  """'' if a node with environment `env` may be forked from a fork server
  started with `server`; otherwise why not, in words."""
  if list(argv[1:3]) != ENTRY_ARGV:
    return 'its command is not the node entry (python -m acme_launch.node.entry)'
  if env.get('CUDA_VISIBLE_DEVICES', ''):
    return 'it sees a GPU'
  names = {k for k in (*env, *server)
           if k.startswith(IMPORT_TIME_PREFIXES) or k in loopback.SHIM_LOAD_ENV}
  differ = sorted(k for k in names if env.get(k) != server.get(k))
  if differ:
    return f'its {", ".join(differ)} differ from the fork server\'s'
  return ''


def first_forkable(commands: Iterable[Tuple[str, List[str], Dict[str, str]]],
                   skip: str = '') -> Optional[Tuple[List[str], Dict[str, str]]]:
  """(argv, fork server environment) of the first (node, argv, node process
  environment) that may be forked, skipping node `skip` (--debug_node's);
  None if none may."""
  for node, argv, env in commands:
    if node == skip:
      continue
    server = server_env(env)
    if not why_not_forked(server, server, argv):
      return argv, server
  return None


class ForkedProcess:
  """What the supervisor needs of a subprocess.Popen, for a forked node."""

  def __init__(self, server: 'ForkServer', pid: int, stdout):
    self._server = server
    self.pid = pid
    self.stdout = stdout
    self.returncode: Optional[int] = None

  def poll(self) -> Optional[int]:
    if self.returncode is None:
      self.returncode = self._server.status_of(self.pid)
    return self.returncode

  def wait(self, timeout: Optional[float] = None) -> int:
    deadline = None if timeout is None else time.time() + timeout
    while self.poll() is None:
      if deadline is not None and time.time() > deadline:
        raise subprocess.TimeoutExpired(str(self.pid), timeout)
      time.sleep(0.05)
    return self.returncode

  def send_signal(self, sig: int) -> None:
    if self.poll() is None:
      os.kill(self.pid, sig)

  def kill(self) -> None:
    self.send_signal(signal.SIGKILL)


class ForkServer:
  """One fork server process and the nodes it forked."""

  def __init__(self, env: Dict[str, str], cwd: str, python: str,
               relay: Optional[Callable[[object], None]] = None,
               preexec_fn: Callable[[], None] = die_with_parent):
    """Starts it; `relay(stream)` copies its own output to its log (None:
    it waits in the pipe until relay_output)."""
    self.env = env
    self.python = python
    self._sock, theirs = socket.socketpair(socket.AF_UNIX,
                                           socket.SOCK_SEQPACKET)
    self.popen = subprocess.Popen(
        [python, '-m', 'acme_launch.node.forkserver',
         f'--socket_fd={theirs.fileno()}'],
        env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors='replace',
        start_new_session=True, preexec_fn=preexec_fn,
        pass_fds=(theirs.fileno(),))
    theirs.close()
    self._relay: Optional[threading.Thread] = None
    if relay is not None:
      self.relay_output(relay)
    self._stopped = False
    self._lock = threading.Condition()
    self._next_id = 0
    self._started: Dict[int, int] = {}     # Request id -> pid.
    self._statuses: Dict[int, int] = {}    # Pid -> exit status.
    self._closed = False                   # Its socket end closed: gone.
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def relay_output(self, relay: Callable[[object], None]) -> None:
    """Starts `relay(stream)` on its output, from what is still in the pipe."""
    self._relay = threading.Thread(target=relay, args=(self.popen.stdout,),
                                   daemon=True)
    self._relay.start()

  def _read(self) -> None:
    while True:
      try:
        data = self._sock.recv(65536)
      except OSError:
        data = b''
      with self._lock:
        if not data:
          self._closed = True
          self._lock.notify_all()
          return
        message = json.loads(data)
        if 'id' in message:
          self._started[message['id']] = message['pid']
        else:
          self._statuses[message['pid']] = message['status']
        self._lock.notify_all()

  def alive(self) -> bool:
    return not self._closed and self.popen.poll() is None

  def spawn(self, argv: List[str], env: Dict[str, str],
            cwd: str) -> Optional[ForkedProcess]:
    """Forks a node running `argv`'s entry; None if the server is gone."""
    read_fd, write_fd = os.pipe()
    with self._lock:
      request_id = self._next_id
      self._next_id += 1
    try:
      socket.send_fds(self._sock, [json.dumps(
          {'id': request_id, 'argv': argv, 'env': env, 'cwd': cwd}).encode()],
                      [write_fd])
    except OSError:
      os.close(read_fd)
      return None
    finally:
      os.close(write_fd)
    with self._lock:
      # The server answers once it has imported everything (seconds).
      while request_id not in self._started and self.alive():
        self._lock.wait(0.5)
      pid = self._started.get(request_id)
      if pid is None:
        os.close(read_fd)
        return None
    stdout = open(read_fd, 'r', errors='replace')
    return ForkedProcess(self, pid, stdout)

  def status_of(self, pid: int) -> Optional[int]:
    """A forked node's exit status; None while it runs. If the server died
    without telling, its children died with it (PR_SET_PDEATHSIG): SIGKILL."""
    with self._lock:
      if pid in self._statuses:
        return self._statuses[pid]
      if self.alive():
        return None
    try:
      os.kill(pid, 0)
      return None  # Dying; init reaps it.
    except ProcessLookupError:
      return -signal.SIGKILL
    except PermissionError:
      return -signal.SIGKILL  # The pid is someone else's now.

  def how_it_ended(self) -> str:
    code = self.popen.poll()
    if code is None:
      return 'closed its socket'
    return (f'was killed by signal {-code}' if code < 0
            else f'exited with code {code}')

  def stop(self) -> None:
    """Closes its socket (it exits) and kills what is left of it."""
    if self._stopped:
      return
    self._stopped = True
    try:
      self._sock.shutdown(socket.SHUT_RDWR)
    except OSError:
      pass
    try:
      self.popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
      pass
    try:
      os.killpg(self.popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass
    self.popen.wait()
    self._sock.close()
    if self._relay is not None:
      self._relay.join(timeout=5)
    else:
      self.popen.stdout.close()


def start_early(plan, process_env: Callable[[str, Dict[str, str]],
                                            Dict[str, str]],
                cwd: str, skip: str = '') -> Optional[ForkServer]:
  """A fork server for a run of `plan` (a CPU plan), started before the
  program is built (see the module docstring); None if no node may be
  forked. `process_env(node, plan env)` is a node process's environment."""
  found = first_forkable(
      ((p.node, [sys.executable, *ENTRY_ARGV], process_env(p.node, dict(p.env)))
       for p in plan.placements), skip)
  if found is None:
    return None
  argv, env = found
  return ForkServer(env, cwd, argv[0])
