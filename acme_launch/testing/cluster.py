"""A Ray cluster of several hosts on this machine, one network namespace each
(for the Ray tests and bench/cluster.py, bench/chaos.py).

Each host is a network namespace (`ip netns`) with one veth into a bridge in
the root namespace and its own address in a private /24; the bridge itself
has no address, so nothing outside the namespaces reaches them. Ray's own
CLI starts the head in the first namespace and a worker in each other one,
with token authentication on (a token file of the test's own) and a custom
resource `host_<name>` (100 units: a node asking 1 is pinned there, up to 100 nodes) per host, plus any
`resources` given per host (a resource several hosts share lets Ray choose
among them). A host given `private` folders runs Ray in its own mount
namespace with an empty tmpfs over each: it does not see what the other
hosts see there, as a machine without a shared filesystem. `outsiders`
are namespaces on the same bridge, with addresses in the same /24, that run
no Ray: other machines of the cluster network. Needs root (CAP_NET_ADMIN,
CAP_SYS_ADMIN).
"""

import json
import os
import random
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

RAY_PORT = 6379


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
  return subprocess.run(argv, capture_output=True, text=True, check=check,
                        timeout=120)


def why_not_available() -> str:
  """'' when namespaces can be made here, else the reason to skip."""
  if os.geteuid() != 0:
    return 'network namespaces need root'
  if shutil.which('ip') is None:
    return "no 'ip' command (iproute2)"
  name = f'aclprobe{os.getpid() % 100000}'
  result = _run('ip', 'netns', 'add', name, check=False)
  if result.returncode != 0:
    return f'cannot create a network namespace: {result.stderr.strip()}'
  _run('ip', 'netns', 'del', name, check=False)
  return ''


class NetnsCluster:
  """Hosts `names` (first = head) with `cpus[name]` Ray CPUs each."""

  def __init__(self, names: Sequence[str], cpus: Dict[str, int],
               resources: Optional[Dict[str, Dict[str, float]]] = None,
               private: Optional[Dict[str, Sequence[str]]] = None,
               token_auth: bool = True, outsiders: Sequence[str] = ()):
    self.names = list(names)
    self.outsiders = list(outsiders)
    self.cpus = cpus
    self.resources = resources or {}
    self.private = private or {}
    self.tag = f'acl{os.getpid() % 10000}'
    self.subnet = f'10.213.{random.randint(1, 250)}'
    self.ips = {n: f'{self.subnet}.{i + 1}'
                for i, n in enumerate(self.names + self.outsiders)}
    self.temp = tempfile.mkdtemp(prefix='acl')  # Short: Ray's socket paths.
    self.token_path = os.path.join(self.temp, 'auth_token')
    self.env = dict(os.environ, RAY_AUTH_MODE='token',
                    RAY_AUTH_TOKEN_PATH=self.token_path,
                    RAY_USAGE_STATS_ENABLED='0')
    if not token_auth:
      # An open cluster. Said outright: with RAY_AUTH_MODE unset, Ray's
      # `ray start` turns tokens on if ~/.ray/auth_token exists (a local
      # ray.init() writes one), and its clients send that file's token.
      self.env['RAY_AUTH_MODE'] = 'disabled'
      del self.env['RAY_AUTH_TOKEN_PATH']
    self.env.pop('RAY_ADDRESS', None)
    # As a user's shell has it: a jax import in the test process sets
    # TF_CPP_MIN_LOG_LEVEL=1, which launchers would keep (TF's warnings).
    self.env.pop('TF_CPP_MIN_LOG_LEVEL', None)
    self._made: List[List[str]] = []  # Undo commands, run in reverse.

  @property
  def address(self) -> str:
    return f'{self.ips[self.names[0]]}:{RAY_PORT}'

  def namespace(self, name: str) -> str:
    return f'{self.tag}_{name}'

  def in_host(self, name: str, argv: Sequence[str]) -> List[str]:
    return ['ip', 'netns', 'exec', self.namespace(name), *argv]

  def pids(self, name: str) -> List[int]:
    result = _run('ip', 'netns', 'pids', self.namespace(name), check=False)
    return [int(p) for p in result.stdout.split()]

  def run_processes(self) -> List[tuple]:
    """(host, pid, command) of every acme-launch node process and NodeHost
    actor in the hosts' namespaces."""
    found = []
    for host in self.names:
      for pid in self.pids(host):
        try:
          with open(f'/proc/{pid}/cmdline', 'rb') as f:
            command = f.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
          continue
        if 'acme_launch.node.entry' in command or 'NodeHost' in command:
          found.append((host, pid, command[:120]))
    return found

  def _step(self, argv: Sequence[str], undo: Sequence[str] = ()) -> None:
    _run(*argv)
    if undo:
      self._made.append(list(undo))

  def up(self) -> None:
    bridge = f'{self.tag}br'
    self._step(['ip', 'link', 'add', bridge, 'type', 'bridge'],
               ['ip', 'link', 'del', bridge])
    self._step(['ip', 'link', 'set', bridge, 'up'])
    for name in self.names + self.outsiders:
      ns, veth = self.namespace(name), f'{self.tag}{name}'
      self._step(['ip', 'netns', 'add', ns], ['ip', 'netns', 'del', ns])
      self._step(['ip', 'link', 'add', veth, 'type', 'veth', 'peer', 'name',
                  veth + 'p'], ['ip', 'link', 'del', veth])
      self._step(['ip', 'link', 'set', veth + 'p', 'netns', ns])
      self._step(['ip', 'link', 'set', veth, 'master', bridge])
      self._step(['ip', 'link', 'set', veth, 'up'])
      self._step(self.in_host(name, ['ip', 'addr', 'add',
                                     f'{self.ips[name]}/24', 'dev', veth + 'p']))
      self._step(self.in_host(name, ['ip', 'link', 'set', veth + 'p', 'up']))
      self._step(self.in_host(name, ['ip', 'link', 'set', 'lo', 'up']))
    with open(os.open(self.token_path, os.O_WRONLY | os.O_CREAT, 0o600), 'w') as f:
      f.write(secrets.token_hex(32))
    for name in self.names:
      self.start_ray(name)

  def host_temp(self, name: str) -> str:
    """Host `name`'s temp folder (TMPDIR of its Ray daemons and workers,
    so of the run's actors and nodes there), removed by `down`."""
    return os.path.join(self.temp, f'{name}-tmp')

  def start_ray(self, name: str) -> None:
    ray = os.path.join(os.path.dirname(sys.executable), 'ray')
    head = name == self.names[0]
    argv = [ray, 'start', f'--node-ip-address={self.ips[name]}',
            f'--num-cpus={self.cpus[name]}', '--num-gpus=0',
            '--resources=' + json.dumps({f'host_{name}': 100,
                                         **self.resources.get(name, {})}),
            '--object-store-memory=80000000', '--disable-usage-stats',
            f'--temp-dir={os.path.join(self.temp, name)}']
    argv += (['--head', f'--port={RAY_PORT}', '--include-dashboard=false']
             if head else [f'--address={self.address}'])
    if self.private.get(name):
      # Ray's daemons inherit the mount namespace `ray start` ran in.
      mounts = ' && '.join(f'mount -t tmpfs -o mode=0700 acl {shlex.quote(d)}'
                           for d in self.private[name])
      argv = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
              f'{mounts} && exec "$@"', 'sh', *argv]
    os.makedirs(self.host_temp(name), mode=0o700, exist_ok=True)
    result = subprocess.run(self.in_host(name, argv),
                            env=dict(self.env, TMPDIR=self.host_temp(name)),
                            capture_output=True, text=True, timeout=180,
                            check=False)
    if result.returncode != 0:
      raise RuntimeError(f'ray start on {name} failed: '
                         f'{(result.stderr or result.stdout)[-2000:]}')

  def kill_hosts(self, names: Sequence[str], grace: float = 3.0,
                 signals=(signal.SIGTERM, signal.SIGKILL)) -> None:
    """Ends every process in the hosts' namespaces: SIGTERM, then SIGKILL."""
    for sig in signals:
      for name in names:
        for pid in self.pids(name):
          try:
            os.kill(pid, sig)
          except ProcessLookupError:
            pass
      deadline = time.time() + grace
      while any(self.pids(n) for n in names) and time.time() < deadline:
        time.sleep(0.2)

  def down(self) -> None:
    try:
      self.kill_hosts(self.names + self.outsiders)
    except Exception:
      pass
    for undo in reversed(self._made):
      _run(*undo, check=False)
    self._made = []
    shutil.rmtree(self.temp, ignore_errors=True)
