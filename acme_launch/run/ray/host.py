"""What runs on each host of a Ray cluster for `--launch_type=ray`.

The launcher (run/ray/launch.py) makes one Ray actor per Launchpad node. That
actor, a `NodeHost`, lives on the host Ray placed it on and:
  - tells the launcher the host's cluster address, free ports there for the
    node's servers, and the GPUs Ray gave it;
  - checks whether it sees the run directory the launcher wrote, and that
    the bind shim lands wildcard binds on the host's cluster address;
  - on a host that does not see the run directory, keeps a mirror of it for
    its node and hands over what the node wrote there (run/ray/files.py);
  - keeps the list of the run's hosts that its node's servers accept
    connections from (the shim's hosts file, run/loopback.py), rewritten by
    the launcher whenever a node lands on another host;
  - writes Launchpad's pickled program, shipped as bytes, to a private
    folder on its host and starts the node as `python -m
    acme_launch.node.entry ...`, the command local_mp runs, with the node's
    planned environment and its log in the run directory (or the mirror);
  - reports the node's exit code, forwards SIGTERM, and kills the node's
    process group when told, at exit, or (PR_SET_PDEATHSIG) when the actor's
    process dies, so a lost launcher leaves no node behind.
Node processes unpickle two small objects from here, so this module imports
neither ray nor launchpad at the top: `FixedAddress`, the address of a
node's server, and `StopRequest`, what `lp.stop()` calls in a Ray run.
"""

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

from acme_launch.run import ports

_PR_SET_PDEATHSIG = 1
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))  # Holds acme_launch/: run/ray/host.py.
# Set by Ray in its worker processes; a node process gets the planner's.
_RAY_WORKER_ONLY = ('OMP_NUM_THREADS', 'CUDA_VISIBLE_DEVICES')


class FixedAddress:
  """A Launchpad address builder for one server: 'IP:PORT' chosen at launch.

  Launchpad's local builder says 'localhost:<free port>'; on a cluster each
  server's address is its host's cluster address and a port free there.
  A node restarted on another host resolves its own addresses through its
  NodeEnv's moved_addresses, 'OLD=NEW' pairs (its pickled program still holds
  the ones it was launched with; only actors and evaluators move, and nobody
  dials them). (Launchpad only calls `build()`: no need to import its base class.)
  """

  def __init__(self, address: str):
    self._address = address

  def build(self) -> str:
    from acme_launch.plan import node_env
    for old, new in node_env.NodeEnv.from_environ().moved_addresses:
      if old == self._address and new:
        return new
    return self._address


class StopRequest:
  """`lp.stop()` inside a node of a Ray run: ask the launcher to stop.

  Under local_mp lp.stop() sends SIGTERM to the launcher's pid, which means
  nothing on another host. Here it leaves `stop_request.json` in the run
  directory, which the launcher polls.
  """

  def __init__(self, path: str):
    self._path = path

  def __call__(self) -> None:
    from acme_launch import layout
    from acme_launch.plan import node_env
    path = layout.on_this_host(self._path)  # Shipped from a mirror.
    tmp_path = f'{path}.{os.getpid()}.tmp'
    with open(tmp_path, 'w') as f:
      json.dump({'time': time.time(),
                 'node': node_env.NodeEnv.from_environ().node}, f)
    os.replace(tmp_path, path)


def _in_child() -> None:
  """Before exec: private files, as local_mp's nodes; die with the actor."""
  os.umask(0o077)
  libc = ctypes.CDLL('libc.so.6', use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class NodeHost:
  """One node's process on the host Ray placed this actor on (see above).

  Ray runs a plain actor's methods on its main thread, which matters:
  PR_SET_PDEATHSIG fires when the thread that started the child ends.
  """

  def __init__(self, node: str):
    self._node = node
    self._popen: Optional[subprocess.Popen] = None
    self._folder = ''
    self._hosts_file = ''  # The run's hosts, for the shim (allow_hosts).
    self._mirror = None  # ray_files.Mirror, on a host without the run dir.
    self._ports = ports.PortHolder()  # The node's server ports (free_ports).
    atexit.register(self.kill)

  def describe(self) -> Dict[str, object]:
    """Where this actor landed: cluster address, Ray node, GPUs."""
    import ray
    return {
        'ip': ray.util.get_node_ip_address(),
        'ray_node_id': ray.get_runtime_context().get_node_id(),
        'hostname': socket.gethostname(),
        'gpu_ids': [str(g) for g in ray.get_gpu_ids()],
        'pid': os.getpid(),
    }

  def free_ports(self, ip: str, count: int) -> List[int]:
    """`count` distinct TCP ports free on `ip` now, held by this actor until
    `kill` (run/ports.py: no other process is handed them meanwhile)."""
    return [self._ports.take(ip) for _ in range(count)]

  def check_host(self, marker_path: str, marker_text: str,
                 ip: str) -> Tuple[bool, str]:
    """(whether this host sees the run directory, '' when it can run nodes
    of the run, else why not in one line).

    It sees it when the folder at that path here passes the launcher's
    checks (safe_dirs.py: this user's, nobody else's to change, not a link)
    and holds the launcher's random marker text, read without following a
    link; else its nodes write into a private mirror (run/ray/files.py).
    """
    from acme_launch import errors
    from acme_launch import safe_dirs
    try:
      shared = safe_dirs.read_file(
          os.path.dirname(marker_path), os.path.basename(marker_path),
          'run directory') == marker_text.encode()
    except (OSError, errors.LaunchError):
      shared = False
    try:  # Where the node's program and mirror go (private_temp_folder).
      safe_dirs.check_shared(tempfile.gettempdir(), 'temp folder')
    except errors.LaunchError as e:
      return shared, str(e)
    from acme_launch.run import loopback
    try:
      loopback.ensure(ip)
    except loopback.Unavailable as e:
      return shared, (f'{e} (the shim keeps node servers on the cluster '
                      f'address {ip})')
    return shared, ''

  def allow_hosts(self, addresses: List[str], run_key: bytes = b'') -> str:
    """The node's servers accept connections from `addresses` (the run's
    hosts) and from this host's processes of this user, nothing else: the
    shim reads this list, the file returned, at each connection from
    another host. With `run_key`, each of those connections, both ways,
    must prove it (the shim's handshake): kept beside the list, in the
    same private folder, mode 0600; the node is told its path only."""
    from acme_launch import safe_dirs
    from acme_launch.run import loopback
    if not self._hosts_file or not os.path.isdir(
        os.path.dirname(self._hosts_file)):
      self._hosts_file = os.path.join(safe_dirs.private_temp_folder(
          'acme-launch-hosts-', 'folder of the run\'s hosts'), 'hosts')
    loopback.write_hosts(self._hosts_file, addresses)
    if run_key:
      loopback.write_run_key(self._key_file(), run_key)
    return self._hosts_file

  def _key_file(self) -> str:
    return os.path.join(os.path.dirname(self._hosts_file), 'run_key')

  def make_mirror(self, files: Dict[str, bytes]) -> str:
    """This node's mirror of the run directory (made once), with `files`
    (relative path -> bytes) from the launcher's; returns its root."""
    from acme_launch.run.ray import files as ray_files
    if self._mirror is None:
      self._mirror = ray_files.Mirror()
    self._mirror.receive(files)
    return self._mirror.root

  def pull(self, last: bool = False) -> list:
    """What the node wrote into its mirror since the last pull (see
    ray_files.Mirror.pull); `last` removes the mirror after."""
    if self._mirror is None:
      return []
    changes = self._mirror.pull()
    if last:
      self._mirror.remove()
      self._mirror = None
    return changes

  def start(self, argv: List[str], env_overrides: Dict[str, str],
            program_path: str, program_bytes: bytes, log_path: str) -> int:
    """Starts the node; returns its pid on this host.

    `program_bytes` is Launchpad's pickled program, at `program_path` on
    the launcher's host: it is written to a private folder here, the
    node's temp folder too, and the command is pointed at it. GPUs: a node
    planned on GPUs sees the ones Ray assigned to this actor.
    """
    from acme_launch import credentials
    from acme_launch.plan import node_env
    from acme_launch.run import loopback
    import ray
    from acme_launch import safe_dirs
    self._folder = safe_dirs.private_temp_folder(
        'acme-launch-node-', 'folder of the node\'s program')
    local_path = os.path.join(self._folder, os.path.basename(program_path))
    with open(os.open(local_path, os.O_WRONLY | os.O_CREAT, 0o600), 'wb') as f:
      f.write(program_bytes)
    argv = [sys.executable] + [local_path if a == program_path else a
                               for a in argv[1:]]

    # This host's worker environment (`ray start`'s) less its credentials
    # (credentials.py), but those the plan's pass_env keeps.
    passed = node_env.NodeEnv.from_environ(env_overrides).pass_env
    env = {k: v for k, v in credentials.node_environ(os.environ, passed).items()
           if k not in _RAY_WORKER_ONLY}
    env.update(env_overrides)
    if env_overrides.get('CUDA_VISIBLE_DEVICES'):
      env['CUDA_VISIBLE_DEVICES'] = ','.join(str(g) for g in ray.get_gpu_ids())
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (_REPO_ROOT, env.get('PYTHONPATH', '')) if p)
    env['LD_PRELOAD'] = loopback.preload_value(env.get('LD_PRELOAD', ''),
                                               loopback.library_path())
    if not self._hosts_file:
      raise RuntimeError('allow_hosts() was not called before start()')
    env[loopback.HOSTS_FILE_ENV] = self._hosts_file
    if os.path.exists(self._key_file()):
      env[loopback.RUN_KEY_ENV] = self._key_file()
    # Removed by kill with what the node left there (run/local_mp/
    # children.py's private_temp_dir says why).
    env['TMPDIR'] = self._folder
    log_fd = safe_dirs.open_append_nofollow(log_path)  # Never through a link.
    try:
      self._popen = subprocess.Popen(
          argv, env=env, cwd=_REPO_ROOT, stdin=subprocess.DEVNULL,
          stdout=log_fd, stderr=subprocess.STDOUT,
          start_new_session=True, preexec_fn=_in_child)
    finally:
      os.close(log_fd)
    return self._popen.pid

  def poll(self) -> Optional[int]:
    """The node's exit code, or None while it runs."""
    return None if self._popen is None else self._popen.poll()

  def terminate(self) -> None:
    """SIGTERM to the node: stateful nodes save their checkpoints."""
    if self._popen is not None and self._popen.poll() is None:
      try:
        self._popen.send_signal(signal.SIGTERM)
      except ProcessLookupError:
        pass

  def kill(self) -> None:
    """SIGKILL to the node's process group; removes its program files and
    lets its ports go."""
    if self._popen is not None:
      try:
        os.killpg(self._popen.pid, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        pass
      self._popen.wait()
    for folder in (self._folder, os.path.dirname(self._hosts_file)):
      if folder:
        shutil.rmtree(folder, ignore_errors=True)
    self._ports.release()
