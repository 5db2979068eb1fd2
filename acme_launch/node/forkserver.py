"""The fork server of `--node_start=fork`: node processes without the imports.

Every node process imports TensorFlow, JAX, Reverb, Launchpad, Acme and
EnvPool before it runs anything: about 4.5 CPU-seconds each, paid five times
over at the start of a local_mp run. This process (started once per run by
the supervisor, run/forkserver.py) imports them once and then forks one
child per node it is asked for. A child applies its node's environment,
working directory, session and output pipe, and runs node/entry.py's main()
as `python -m acme_launch.node.entry` would, under that command line as its
process title (what ps and /proc/PID/cmdline show).

Nothing here initializes TF's context or a JAX backend (both would start
threads and devices that a fork does not carry over); the node does that
after the fork, with its own environment (cores, TF settings, JAX's
compilation cache). What is read at import time (JAX_* into JAX's config,
TF_* by TF's C++ library, PYTHON* by the interpreter, LD_* by the loader,
OMP_NUM_THREADS by the OpenBLAS that numpy loads) is this process's own:
the supervisor forks only nodes whose values of those agree with the ones
it was started with, and execs the others.

Protocol on the Unix socket (SOCK_SEQPACKET, one JSON message each), fd
given by --socket_fd:
  supervisor -> here: {"id", "argv", "env", "cwd"} with the node's output
    pipe (its write end) attached as a file descriptor;
  here -> supervisor: {"id", "pid"} once forked, {"pid", "status"} once
    that child exited (status as subprocess's returncode: -N for signal N).
It exits when the supervisor's end closes, and dies with it
(PR_SET_PDEATHSIG); its children die with it the same way.
"""

import ctypes
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback
from typing import Optional

import setproctitle

_PR_SET_PDEATHSIG = 1
MAX_MESSAGE = 1 << 20


def _import_heavy_modules() -> None:
  """What every node imports anyway, node-independent; nothing started."""
  from acme_launch import quiet
  quiet.quiet_third_party()
  from acme_launch import compat  # noqa: F401
  import tensorflow  # noqa: F401
  import jax  # noqa: F401
  import reverb  # noqa: F401
  import launchpad  # noqa: F401
  from launchpad.nodes.python import process_entry  # noqa: F401
  import acme  # noqa: F401
  import envpool  # noqa: F401
  from acme.agents.jax import d4pg, dqn, impala, ppo, r2d2, sac, td3  # noqa: F401
  from acme_launch.node import entry  # noqa: F401


def _die_with_parent(parent: Optional[int] = None) -> None:
  """SIGKILL this process when its parent dies; with `parent` (its pid),
  exits now if that one already has (the signal would never come)."""
  libc = ctypes.CDLL('libc.so.6', use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  if parent is not None and os.getppid() != parent:
    os._exit(1)


def _run_child(request: dict, out_fd: int, sock: socket.socket,
               server: int) -> None:
  """In the forked child of `server` (a pid): becomes the node's process,
  runs it, exits."""
  code = 1
  try:
    sock.close()
    os.setsid()
    _die_with_parent(server)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    os.chdir(request['cwd'])
    os.environ.clear()  # putenv/unsetenv too: C code sees the node's env.
    os.environ.update(request['env'])
    tempfile.tempdir = None  # gettempdir() reads the node's TMPDIR anew.
    # ps, top and psutil show the command an exec'd node would have had.
    setproctitle.setproctitle(' '.join(request['argv']))
    from acme_launch.node import entry
    # `python -m acme_launch.node.entry ARGS` has sys.argv [entry.py, ARGS].
    sys.argv = [entry.__file__, *request['argv'][3:]]
    from acme_launch import quiet
    quiet.quiet_third_party()
    try:
      entry.main()
      code = 0
    except SystemExit as e:
      code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
      if not isinstance(e.code, (int, type(None))):
        print(e.code, file=sys.stderr)
    except KeyboardInterrupt:
      code = 128 + signal.SIGINT
  except BaseException:
    traceback.print_exc()
    code = 1
  finally:
    try:
      sys.stdout.flush()
      sys.stderr.flush()
    finally:
      os._exit(code)


def _send(sock: socket.socket, message: dict) -> None:
  sock.send(json.dumps(message).encode())


def _reap(sock: socket.socket, children: set) -> None:
  """Reports every child that exited since the last call."""
  while children:
    try:
      pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
      return
    if pid == 0:
      return
    children.discard(pid)
    _send(sock, {'pid': pid, 'status': os.waitstatus_to_exitcode(status)})


def serve(sock: socket.socket) -> None:
  """Forks a child per request until the supervisor's end closes."""
  children = set()
  server = os.getpid()
  while True:
    ready, _, _ = select.select([sock], [], [], 0.2)
    _reap(sock, children)
    if not ready:
      continue
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 1)
    if not data:
      return  # The supervisor closed its end: the run is over.
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
      _run_child(request, fds[0], sock, server)
    for fd in fds:
      os.close(fd)
    children.add(pid)
    _send(sock, {'id': request['id'], 'pid': pid})


def main() -> None:
  # If the launcher died before this prctl, its end of the socket is closed
  # and serve() returns at once.
  _die_with_parent()
  fd = int(next(a for a in sys.argv if a.startswith('--socket_fd='))
           .split('=', 1)[1])
  sock = socket.socket(fileno=fd)
  # setproctitle claims the memory of argv and environ for titles on first
  # use; here, while this process's environment still lies there (a child
  # replaces its environment before it sets its title).
  setproctitle.getproctitle()
  _import_heavy_modules()
  try:
    serve(sock)
  except (BrokenPipeError, ConnectionResetError):
    pass  # The supervisor is gone.
  # Nothing here to save or close: exit without the interpreter's teardown
  # of TensorFlow and JAX (about 2 s, which the launcher's stop waits for).
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)


if __name__ == '__main__':
  main()
