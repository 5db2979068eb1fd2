"""A real Slurm of several nodes on this machine, for the tests.

Debian's slurm-wlm and munge (`.ci/run` installs them). Each Slurm node is
a network namespace of its own, with one veth into a bridge in the root
namespace and its own address in a private /24 (10.214.X.0/24; the bridge
has no address, so nothing outside the namespaces reaches them), and a UTS
namespace whose hostname is its NodeName: its slurmd finds its node by that
name, and whatever a job runs there sees that hostname. Each node also has
a private tmpfs over `ray_tmp` (a node-local /tmp for Ray's sockets and
session files); everything else on the filesystem is shared, as a cluster's
shared filesystem is. munged, and slurmctld in the first node's namespaces,
serve them all (munge's socket is a file). Whatever a job starts (Ray, the
launcher, node processes) runs in its node's namespaces, so `down()` ends
all of it. Needs root.
"""

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Sequence

DAEMONS = ('munged', 'slurmctld', 'slurmd')
# What runs while no job does: the daemons, and slurmctld's script helper.
IDLE_PROCESSES = DAEMONS + ('slurmscriptd',)
PARTITION = 'test'


def why_not_available() -> str:
  """'' when this machine can run the Slurm here; else why not."""
  missing = [tool for tool in (*DAEMONS, 'mungekey', 'sbatch', 'scontrol',
                               'unshare', 'ip')
             if not shutil.which(tool)]
  if missing:
    return (f'{", ".join(missing)} not installed (apt-get install slurm-wlm '
            'munge iproute2; .ci/run does)')
  if os.geteuid() != 0:
    return 'the Slurm daemons and the namespaces need root'
  return ''


def _run(*argv: str) -> subprocess.CompletedProcess:
  result = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          check=False)
  if result.returncode != 0:
    raise RuntimeError(f'{" ".join(argv)} failed: {result.stderr.strip()}')
  return result


class SlurmCluster:
  """Slurm nodes slurm1..slurmN of `cpus` CPUs each, one set of namespaces
  per node; the controller runs in the first node's."""

  def __init__(self, nodes: int, cpus: int,
               env: Optional[Dict[str, str]] = None):
    self.cpus = cpus
    self.node_names = [f'slurm{i + 1}' for i in range(nodes)]
    self.tag = f'acls{os.getpid() % 100000}'
    subnet = f'10.214.{random.randint(1, 250)}'
    self.addresses = {n: f'{subnet}.{i + 1}'
                      for i, n in enumerate(self.node_names)}
    self.dir = tempfile.mkdtemp(prefix='acls')  # Short: Ray's socket paths.
    os.chmod(self.dir, 0o700)
    self.conf = os.path.join(self.dir, 'slurm.conf')
    # Each node's own Ray files: a tmpfs of each node's over this folder.
    self.ray_tmp = os.path.join(self.dir, 'ray')
    self.env = dict(os.environ if env is None else env, SLURM_CONF=self.conf)
    for name in ('SLURM_JOB_ID', 'RAY_ADDRESS'):
      self.env.pop(name, None)
    self._undo: List[List[str]] = []  # Run in reverse by down().

  @property
  def controller(self) -> str:
    return self.node_names[0]

  @property
  def address(self) -> str:
    """The controller's node's address (where a job's Ray head runs)."""
    return self.addresses[self.controller]

  def namespace(self, node: str) -> str:
    return f'{self.tag}{node}'

  def _step(self, argv: Sequence[str], undo: Sequence[str] = ()) -> None:
    _run(*argv)
    if undo:
      self._undo.append(list(undo))

  def up(self) -> None:
    bridge = f'{self.tag}br'
    self._step(['ip', 'link', 'add', bridge, 'type', 'bridge'],
               ['ip', 'link', 'del', bridge])
    self._step(['ip', 'link', 'set', bridge, 'up'])
    for i, node in enumerate(self.node_names):
      ns, veth = self.namespace(node), f'{self.tag}v{i + 1}'
      self._step(['ip', 'netns', 'add', ns], ['ip', 'netns', 'del', ns])
      self._step(['ip', 'link', 'add', veth, 'type', 'veth', 'peer', 'name',
                  veth + 'p'], ['ip', 'link', 'del', veth])
      self._step(['ip', 'link', 'set', veth + 'p', 'netns', ns])
      self._step(['ip', 'link', 'set', veth, 'master', bridge])
      self._step(['ip', 'link', 'set', veth, 'up'])
      for argv in (['ip', 'addr', 'add', f'{self.addresses[node]}/24', 'dev',
                    veth + 'p'],
                   ['ip', 'link', 'set', veth + 'p', 'up'],
                   ['ip', 'link', 'set', 'lo', 'up']):
        self._step(self.in_namespace(argv, node))
    for sub in ('state', 'log', 'ray'):
      os.makedirs(os.path.join(self.dir, sub))
    for node in self.node_names:
      os.makedirs(self._path('spool', node))
    key = self._path('munge.key')
    _run('mungekey', '--create', f'--keyfile={key}', '--force')
    os.chmod(key, 0o600)
    with open(self.conf, 'w') as f:
      f.write(self._slurm_conf())
    # Cgroup v1 named, not detected: detection fails where /sys/fs/cgroup is
    # a tmpfs of v1 controllers. Nothing here uses cgroups (proctrack/pgid).
    with open(self._path('cgroup.conf'), 'w') as f:
      f.write('CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n')
    _run(*self.in_namespace([
        'munged', '--force', f'--socket={self._path("munge.sock")}',
        f'--key-file={key}', f'--pid-file={self._path("munged.pid")}',
        f'--log-file={self._path("log", "munged.log")}',
        f'--seed-file={self._path("munged.seed")}']))
    for node in self.node_names:
      daemons = f'slurmd -f {self.conf}'
      if node == self.controller:
        daemons = f'slurmctld -f {self.conf} -i && {daemons}'
      # `ip netns exec` gives the node a mount namespace of its own (mounts
      # do not propagate back), where its tmpfs over ray_tmp stays private.
      subprocess.run(self.in_namespace([
          'unshare', '--uts', 'sh', '-c',
          f'hostname {node} && mount -t tmpfs -o mode=0755 acls '
          f'{self.ray_tmp} && {daemons}'], node),
                     env=self.env, check=True, timeout=60)
    deadline = time.time() + 60
    while set(self.node_states().values()) - {'idle'} or (
        len(self.node_states()) != len(self.node_names)):
      if time.time() > deadline:
        raise RuntimeError(f'slurmd did not come up: states '
                           f'{self.node_states()}; {self.log_tails()}')
      time.sleep(0.5)

  def _path(self, *parts: str) -> str:
    return os.path.join(self.dir, *parts)

  def _slurm_conf(self) -> str:
    memory_mb = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**20
    nodes = [f'NodeName={node} NodeAddr={self.addresses[node]} '
             f'CPUs={self.cpus} RealMemory={memory_mb // 4} State=UNKNOWN'
             for node in self.node_names]
    return '\n'.join([
        'ClusterName=acmelaunchtest',
        f'SlurmctldHost={self.controller}({self.address})',
        # Slurm's default ports: each namespace has nothing else listening.
        'SlurmctldPort=6817', 'SlurmdPort=6818',
        'SlurmUser=root', 'SlurmdUser=root',
        'AuthType=auth/munge', 'CredType=cred/munge',
        f'AuthInfo=socket={self._path("munge.sock")}',
        f'StateSaveLocation={self._path("state")}',
        # Per node (%n, its NodeName): the slurmd's share one filesystem.
        f'SlurmdSpoolDir={self._path("spool", "%n")}',
        f'SlurmctldPidFile={self._path("slurmctld.pid")}',
        f'SlurmdPidFile={self._path("slurmd-%n.pid")}',
        f'SlurmctldLogFile={self._path("log", "slurmctld.log")}',
        f'SlurmdLogFile={self._path("log", "slurmd-%n.log")}',
        'ProctrackType=proctrack/pgid', 'TaskPlugin=task/none',
        'SelectType=select/cons_tres', 'SelectTypeParameters=CR_CPU',
        'JobAcctGatherType=jobacct_gather/none',
        'AccountingStorageType=accounting_storage/none',
        'MpiDefault=none', 'ReturnToService=2', 'KillWait=5',
        *nodes,
        f'PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE '
        'State=UP', ''])

  def in_namespace(self, argv: Sequence[str],
                   node: Optional[str] = None) -> List[str]:
    """`argv` in `node`'s network namespace (default: the controller's)."""
    return ['ip', 'netns', 'exec', self.namespace(node or self.controller),
            *argv]

  def run(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None,
          timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """`argv` in the controller's network namespace, with this Slurm's
    SLURM_CONF (as a command on a login node)."""
    return subprocess.run(self.in_namespace(argv), env={**self.env,
                                                        **(env or {})},
                          capture_output=True, text=True, timeout=timeout,
                          check=False, **kwargs)

  def node_states(self) -> Dict[str, str]:
    """NodeName -> its state as sinfo says it, flags cut off."""
    result = self.run(['sinfo', '-h', '-N', '-o', '%N %T'], timeout=30)
    states = {}
    for line in result.stdout.splitlines():
      if len(line.split()) == 2:
        node, state = line.split()
        states[node] = state.rstrip('*~#!%$@^-')
    return states

  def log_tails(self) -> str:
    tails = []
    names = ['slurmctld.log', 'munged.log'] + [
        f'slurmd-{node}.log' for node in self.node_names]
    for name in names:
      try:
        with open(self._path('log', name)) as f:
          tails.append(f'{name}: ' + ' | '.join(f.read().splitlines()[-5:]))
      except OSError:
        pass
    return '; '.join(tails)

  def pids(self, node: str) -> List[int]:
    result = subprocess.run(['ip', 'netns', 'pids', self.namespace(node)],
                            capture_output=True, text=True, check=False)
    return [int(p) for p in result.stdout.split()]

  def process_names(self, node: str) -> List[str]:
    """The command names of the processes in `node`'s namespaces."""
    names = []
    for pid in self.pids(node):
      try:
        with open(f'/proc/{pid}/comm') as f:
          names.append(f.read().strip())
      except OSError:
        pass  # Ended meanwhile.
    return names

  def down(self) -> None:
    """Ends every process in the nodes' namespaces, then the namespaces,
    the bridge and the files; each step whatever the others did."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
      for node in self.node_names:
        for pid in self.pids(node):
          try:
            os.kill(pid, sig)
          except ProcessLookupError:
            pass
      deadline = time.time() + 5
      while (any(self.pids(n) for n in self.node_names) and
             time.time() < deadline):
        time.sleep(0.2)
    for undo in reversed(self._undo):
      subprocess.run(undo, check=False, capture_output=True)
    self._undo = []
    shutil.rmtree(self.dir, ignore_errors=True)
