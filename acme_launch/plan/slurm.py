"""The Slurm allocation a launch runs inside, for --dry_run to show.

Inside a Slurm job (SLURM_JOB_ID set, e.g. scripts/slurm/acme_launch.sbatch),
the launcher reads what the job holds from Slurm itself, `scontrol show job
-d` (the job's nodes with the CPUs, memory and GPUs it holds on each): the
hosts a `--launch_type=ray` run can spread over, which the Ray cluster's
own listing then confirms. Outside a job, nothing is read.
"""

import dataclasses
import re
import subprocess
from typing import Mapping, Optional, Tuple

from acme_launch import errors

JOB_ID_ENV = 'SLURM_JOB_ID'
_TIMEOUT_SECONDS = 20.0


@dataclasses.dataclass(frozen=True)
class NodeShare:
  """What the job holds on one node."""
  name: str
  cpus: int
  memory_mb: int      # 0: Slurm set no memory limit for the job there.
  gpus: int


@dataclasses.dataclass(frozen=True)
class Allocation:
  job_id: str
  job_name: str
  partition: str
  nodes: Tuple[NodeShare, ...]
  time_limit: str     # As Slurm shows it: UNLIMITED, 1-00:00:00, ...


def _scontrol(*args: str) -> str:
  try:
    result = subprocess.run(['scontrol', *args], capture_output=True,
                            text=True, timeout=_TIMEOUT_SECONDS, check=False)
  except FileNotFoundError:
    raise errors.LaunchError(
        f'{JOB_ID_ENV} is set but scontrol is not on PATH: run inside the '
        'Slurm job, or unset it') from None
  except subprocess.TimeoutExpired:
    raise errors.LaunchError(
        f'scontrol {" ".join(args)} took over {_TIMEOUT_SECONDS:g} s: is '
        'the Slurm controller reachable?') from None
  if result.returncode != 0:
    raise errors.LaunchError(
        f'scontrol {" ".join(args)} failed: '
        f'{" ".join(result.stderr.split())[:200]}')
  return result.stdout


def expand_hostlist(hostlist: str) -> Tuple[str, ...]:
  """`node[1-3],gpu7` as the names Slurm means, from `scontrol show hostnames`."""
  return tuple(_scontrol('show', 'hostnames', hostlist).split())


def gpu_count(gres: str) -> int:
  """GPUs in a GRES string: `gpu:2(IDX:0-1)`, `gpu:a100:1(IDX:3)`, ''."""
  total = 0
  for item in gres.split(','):
    match = re.match(r'gpu(?::[^:(]+)?:(\d+)', item.strip())
    if match:
      total += int(match.group(1))
  return total


def cpu_count(cpu_ids: str) -> int:
  """CPUs in `0-3,8,10-11` (scontrol's CPU_IDs)."""
  total = 0
  for part in filter(None, cpu_ids.split(',')):
    low, _, high = part.partition('-')
    total += int(high or low) - int(low) + 1
  return total


def _memory_mb(value: str) -> int:
  match = re.fullmatch(r'(\d+)([KMGT]?)', value)
  if not match:
    return 0
  scale = {'K': 1 / 1024, '': 1, 'M': 1, 'G': 1024, 'T': 1024 ** 2}
  return int(int(match.group(1)) * scale[match.group(2)])


def parse_job(text: str) -> Allocation:
  """`scontrol show job -d -o JOB` as an Allocation.

  The detail part repeats `Nodes=LIST CPU_IDs=... Mem=... GRES=...` for each
  set of nodes the job holds the same share of.
  """
  fields = dict(re.findall(r'(?:^|\s)(JobId|JobName|Partition|TimeLimit)=(\S*)',
                           text))
  shares = []
  for nodes, cpu_ids, memory, gres in re.findall(
      r'\sNodes=(\S+) CPU_IDs=(\S*) Mem=(\S*) GRES=(\S*)', text):
    for name in expand_hostlist(nodes):
      shares.append(NodeShare(name, cpu_count(cpu_ids), _memory_mb(memory),
                              gpu_count(gres)))
  return Allocation(fields.get('JobId', '?'), fields.get('JobName', ''),
                    fields.get('Partition', ''), tuple(shares),
                    fields.get('TimeLimit', ''))


def allocation(environ: Mapping[str, str]) -> Optional[Allocation]:
  """The job this process runs in (None outside Slurm); LaunchError if
  Slurm cannot be asked."""
  job_id = environ.get(JOB_ID_ENV, '')
  if not job_id:
    return None
  return parse_job(_scontrol('show', 'job', '-d', '-o', job_id))


def format_allocation(job: Allocation) -> str:
  """--dry_run: the job and what it holds on each node."""
  cpus = sum(n.cpus for n in job.nodes)
  gpus = sum(n.gpus for n in job.nodes)
  lines = [f'Slurm job {job.job_id} ({job.job_name}, partition '
           f'{job.partition}, time limit {job.time_limit}): '
           f'{len(job.nodes)} nodes, {cpus} CPUs, {gpus} GPUs']
  width = max((len(n.name) for n in job.nodes), default=0)
  for node in job.nodes:
    memory = f'{node.memory_mb:,} MiB' if node.memory_mb else 'memory unset'
    lines.append(f'  {node.name:<{width}}  {node.cpus} CPUs, {node.gpus} GPUs, '
                 f'{memory}')
  return '\n'.join(lines)

