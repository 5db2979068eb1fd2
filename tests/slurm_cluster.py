"""A real single-host Slurm for the tests, inside a network namespace.

Debian's slurm-wlm and munge (`.ci/run` installs them): munged, slurmctld and
slurmd run in a network namespace of their own, where the host's one
address (10.213.X.1, on a veth pair that leads nowhere) and loopback are
all there is. Whatever a job starts (Ray, the launcher, node processes)
runs in that namespace too, so `down()` ends all of it.
"""

import os
import random
import shutil
import signal
import socket
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
  missing = [tool for tool in (*DAEMONS, 'mungekey', 'sbatch', 'scontrol')
             if not shutil.which(tool)]
  if missing:
    return (f'{", ".join(missing)} not installed (apt-get install slurm-wlm '
            'munge; .ci/run does)')
  if os.geteuid() != 0:
    return 'the Slurm daemons and the network namespace need root'
  if not shutil.which('ip'):
    return 'iproute2 not installed'
  return ''


def _run(*argv: str) -> None:
  subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)


class SlurmHost:
  """One host's Slurm (controller and compute daemon) in its own namespace."""

  def __init__(self, cpus: int, env: Optional[Dict[str, str]] = None):
    self.cpus = cpus
    self.namespace = f'aclslurm{os.getpid() % 100000}'
    self.address = f'10.213.{random.randint(1, 250)}.1'
    self.node_name = socket.gethostname().split('.')[0]
    self.dir = tempfile.mkdtemp(prefix='acls')  # Short: Ray's socket paths.
    os.chmod(self.dir, 0o700)
    self.conf = os.path.join(self.dir, 'slurm.conf')
    self.env = dict(os.environ if env is None else env, SLURM_CONF=self.conf)
    for name in ('SLURM_JOB_ID', 'RAY_ADDRESS'):
      self.env.pop(name, None)

  def up(self) -> None:
    _run('ip', 'netns', 'add', self.namespace)
    for argv in (['ip', 'link', 'set', 'lo', 'up'],
                 ['ip', 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name',
                  'v1'],
                 ['ip', 'addr', 'add', f'{self.address}/24', 'dev', 'v0'],
                 ['ip', 'link', 'set', 'v0', 'up'],
                 ['ip', 'link', 'set', 'v1', 'up']):
      _run(*self.in_namespace(argv))
    for sub in ('state', 'spool', 'log'):
      os.makedirs(os.path.join(self.dir, sub))
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
    subprocess.run(self.in_namespace(['slurmctld', '-f', self.conf, '-i']),
                   env=self.env, check=True, timeout=60)
    subprocess.run(self.in_namespace(['slurmd', '-f', self.conf]),
                   env=self.env, check=True, timeout=60)
    deadline = time.time() + 60
    while self.node_state() not in ('idle', 'mixed', 'allocated'):
      if time.time() > deadline:
        raise RuntimeError(f'slurmd did not come up: state '
                           f'{self.node_state()!r}; {self.log_tails()}')
      time.sleep(0.5)

  def _path(self, *parts: str) -> str:
    return os.path.join(self.dir, *parts)

  def _slurm_conf(self) -> str:
    memory_mb = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**20
    return '\n'.join([
        'ClusterName=acmelaunchtest',
        f'SlurmctldHost={self.node_name}({self.address})',
        # Slurm's default ports: the namespace has nothing else listening.
        'SlurmctldPort=6817', 'SlurmdPort=6818',
        'SlurmUser=root', 'SlurmdUser=root',
        'AuthType=auth/munge', 'CredType=cred/munge',
        f'AuthInfo=socket={self._path("munge.sock")}',
        f'StateSaveLocation={self._path("state")}',
        f'SlurmdSpoolDir={self._path("spool")}',
        f'SlurmctldPidFile={self._path("slurmctld.pid")}',
        f'SlurmdPidFile={self._path("slurmd.pid")}',
        f'SlurmctldLogFile={self._path("log", "slurmctld.log")}',
        f'SlurmdLogFile={self._path("log", "slurmd.log")}',
        'ProctrackType=proctrack/pgid', 'TaskPlugin=task/none',
        'SelectType=select/cons_tres', 'SelectTypeParameters=CR_CPU',
        'JobAcctGatherType=jobacct_gather/none',
        'AccountingStorageType=accounting_storage/none',
        'MpiDefault=none', 'ReturnToService=2', 'KillWait=5',
        f'NodeName={self.node_name} NodeAddr={self.address} '
        f'CPUs={self.cpus} RealMemory={memory_mb * 3 // 4} State=UNKNOWN',
        f'PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE '
        'State=UP', ''])

  def in_namespace(self, argv: Sequence[str]) -> List[str]:
    return ['ip', 'netns', 'exec', self.namespace, *argv]

  def run(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None,
          timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """`argv` in the namespace, with this Slurm's SLURM_CONF."""
    return subprocess.run(self.in_namespace(argv), env={**self.env,
                                                        **(env or {})},
                          capture_output=True, text=True, timeout=timeout,
                          check=False, **kwargs)

  def node_state(self) -> str:
    result = self.run(['sinfo', '-h', '-o', '%T'], timeout=30)
    return result.stdout.strip().rstrip('*~#!%$@^-')

  def log_tails(self) -> str:
    tails = []
    for name in ('slurmctld.log', 'slurmd.log', 'munged.log'):
      try:
        with open(self._path('log', name)) as f:
          tails.append(f'{name}: ' + ' | '.join(f.read().splitlines()[-5:]))
      except OSError:
        pass
    return '; '.join(tails)

  def pids(self) -> List[int]:
    result = subprocess.run(['ip', 'netns', 'pids', self.namespace],
                            capture_output=True, text=True, check=False)
    return [int(p) for p in result.stdout.split()]

  def process_names(self) -> List[str]:
    """The command names of the processes in the namespace."""
    names = []
    for pid in self.pids():
      try:
        with open(f'/proc/{pid}/comm') as f:
          names.append(f.read().strip())
      except OSError:
        pass  # Ended meanwhile.
    return names

  def down(self) -> None:
    """Ends every process in the namespace, then the namespace and files."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
      for pid in self.pids():
        try:
          os.kill(pid, sig)
        except ProcessLookupError:
          pass
      deadline = time.time() + 5
      while self.pids() and time.time() < deadline:
        time.sleep(0.2)
    subprocess.run(['ip', 'netns', 'del', self.namespace], check=False,
                   capture_output=True)
    shutil.rmtree(self.dir, ignore_errors=True)

