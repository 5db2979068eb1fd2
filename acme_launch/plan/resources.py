"""Per-node resource plan: which GPUs and cores a process gets, how JAX/TF use them.

Stock Acme lets every process grab most of a GPU, so actors die of
out-of-memory at start, and Launchpad keys `local_resources` by group label
only. Here the plan is data made before anything starts: for every node the
Launchpad label it is added under, the GPUs and cores it gets, its typed
settings (plan/node_env.py) and the string environment its process gets; bad
input raises `LaunchError` with one line. The learner gets
`resources.learner.num_devices` GPUs of one model (one JAX process cannot
use two models; IMPALA's and R2D2's learners pmap over them), or as many
virtual CPU devices on a machine without GPUs (XLA's
--xla_force_host_platform_device_count, set here); the other nodes none
unless asked, and the memory planned on each GPU must fit it. Whether the
agent can use that many devices is its adapter's to say: prepare.py checks. The fields of `config.resources`, the CPU and GPU
placement rules and the labels are described in docs/ (resources).

Here: the plan's value types, the node environments and labels, and
`plan_resources`, which runs the parts: plan/specs.py (the config read into
per-node specs), plan/gpus.py, plan/cores.py (placement), plan/table.py
(the --dry_run table).
"""

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import ml_collections

from acme_launch.plan import node_env
from acme_launch.plan.cores import assign_cores
from acme_launch.plan.gpu_inventory import GpuInfo
from acme_launch.plan.gpus import GpuUsage, assign_gpus, plan_gpu_usage, node_planned_mb
from acme_launch.plan.node_env import format_cores
from acme_launch.plan.specs import (FORCE_HOST_DEVICES, GROUPS, NodeSpec,
                                    fail, node_specs)


@dataclasses.dataclass(frozen=True)
class NodePlacement:
  """Where one node runs and what its process is told."""
  node: str                 # Logical name, e.g. 'actor/3'.
  group: str                # One of GROUPS.
  label: str                # Launchpad group label the node is added under.
  gpus: Tuple[int, ...]     # Host GPU indices the process sees (may be empty).
  env: Mapping[str, str]    # Environment variables set in its process.
  gpu_memory_mb: int = 0    # Planned MB on each of its GPUs (0 on the CPU).
  ray_cpus: float = 1.0     # --launch_type=ray: Ray's num_cpus for the node,
  ray_memory_mb: int = 0    # its memory reservation (MB),
  ray_resources: Tuple[Tuple[str, float], ...] = ()  # and custom resources.
  cores: Tuple[int, ...] = ()  # Host cores it is pinned to (empty: any).
  # What node code reads (node/entry.py applies it before TF starts).
  settings: node_env.NodeEnv = node_env.NodeEnv()
  threads: int = 0   # Its OMP_NUM_THREADS (0 = unset): e.g. EnvPool's threads.
  # The JAX devices it runs on: the learner's num_devices (its GPUs, or
  # virtual CPU devices when it has none), 1 for every other node.
  devices: int = 1


@dataclasses.dataclass(frozen=True)
class ResourcePlan:
  placements: Tuple[NodePlacement, ...]
  gpu_usage: Tuple[GpuUsage, ...] = ()
  idle_gpus: Tuple[GpuInfo, ...] = ()   # In the inventory, used by no node.
  cpu_note: str = ''   # How cores were placed, one line for the dry run.

  def placement(self, node: str) -> NodePlacement:
    for placement in self.placements:
      if placement.node == node:
        return placement
    raise KeyError(node)

  def env_by_label(self) -> Dict[str, Dict[str, str]]:
    """The environment for each Launchpad group label."""
    return {p.label: dict(p.env) for p in self.placements}


# Environment and labels ---------------------------------------------------------


def _settings(spec: NodeSpec, cores: Tuple[int, ...]) -> node_env.NodeEnv:
  return node_env.NodeEnv(
      cpus=tuple(cores), tf_gpu=spec.tf_gpu, pass_env=spec.pass_env,
      # Pinned: as many threads as its cores, unless the config says.
      tf_intra_op_threads=spec.intra_op_threads or len(cores),
      tf_inter_op_threads=spec.inter_op_threads or len(cores))


def _env(spec: NodeSpec, gpus: Tuple[int, ...], cores: Tuple[int, ...],
         settings: node_env.NodeEnv) -> Dict[str, str]:
  env = {
      'CUDA_DEVICE_ORDER': 'PCI_BUS_ID',
      'TF_CPP_MIN_LOG_LEVEL': '2',
  }
  if gpus:
    env.update({
        'CUDA_VISIBLE_DEVICES': ','.join(map(str, gpus)),
        'JAX_PLATFORMS': 'cuda,cpu',
        'XLA_PYTHON_CLIENT_PREALLOCATE': str(spec.jax_preallocate).lower(),
        'XLA_PYTHON_CLIENT_MEM_FRACTION': f'{spec.jax_mem_fraction:g}',
        'XLA_PYTHON_CLIENT_ALLOCATOR': spec.jax_allocator,
    })
  else:
    env.update({'CUDA_VISIBLE_DEVICES': '', 'JAX_PLATFORMS': 'cpu'})
  env.update(settings.to_environ())
  threads = spec.omp_threads or len(cores)  # Pinned: as many as its cores.
  if threads:
    env['OMP_NUM_THREADS'] = str(threads)
  env.update(spec.extra_env)
  if not gpus and spec.num_devices > 1:  # The CPU split into N devices.
    env['XLA_FLAGS'] = ' '.join(filter(None, (
        env.get('XLA_FLAGS', ''), f'{FORCE_HOST_DEVICES}={spec.num_devices}')))
  return env


def _labels(groups: Sequence[str], envs: Sequence[Dict[str, str]],
            assigned: Sequence[Tuple[int, ...]],
            cores: Sequence[Tuple[int, ...]]) -> List[str]:
  """One label per distinct environment within a group."""
  labels = [''] * len(groups)
  for group in GROUPS:
    members = [n for n, g in enumerate(groups) if g == group]
    variants: Dict[Tuple, List[int]] = {}
    for n in members:
      variants.setdefault(tuple(sorted(envs[n].items())), []).append(n)
    used = set()
    for same_env in variants.values():
      if len(variants) == 1:
        label = group
      else:
        gpus = assigned[same_env[0]]
        label = (f'{group}_gpu' + '_'.join(map(str, gpus)) if gpus
                 else f'{group}_cpu')
        if cores[same_env[0]]:
          label += '_c' + format_cores(cores[same_env[0]])
        base, k = label, 2
        while label in used:
          label, k = f'{base}_v{k}', k + 1
      used.add(label)
      for n in same_env:
        labels[n] = label
  return labels


def plan_resources(nodes: Sequence[Tuple[str, int]],
                   resources_config: ml_collections.ConfigDict,
                   inventory: Sequence[GpuInfo] = (),
                   host_cores: Optional[Sequence[int]] = None,
                   agent: str = '') -> ResourcePlan:
  """Places each (group, index) node; raises LaunchError on bad input.

  `host_cores`: the cores the nodes may be pinned to (the launcher's own,
  local_mp); None pins nothing. `agent` (config.agent) is named in the
  refusals that concern its learner."""
  groups = [group for group, _ in nodes]
  node_names = [f'{group}/{index}' for group, index in nodes]
  for group in groups:
    if group not in GROUPS:
      fail(f'unknown node group {group!r}; groups: {", ".join(GROUPS)}')
  overhead_mb = int(resources_config.get('cuda_context_overhead_mb', 500))
  if overhead_mb < 0:
    fail('config.resources.cuda_context_overhead_mb must be >= 0, '
          f'got {overhead_mb}')
  specs = node_specs(node_names, groups, resources_config)
  assigned = assign_gpus(node_names, groups, specs, inventory, agent)
  usage = plan_gpu_usage(node_names, specs, assigned, inventory, overhead_mb)
  cores, cpu_note = assign_cores(
      node_names, groups, specs, host_cores,
      bool(resources_config.get('oversubscribe_cpus', False)))
  settings = [_settings(spec, node_cores)
              for spec, node_cores in zip(specs, cores)]
  envs = [_env(spec, gpus, node_cores, node_settings)
          for spec, gpus, node_cores, node_settings in zip(
              specs, assigned, cores, settings)]
  labels = _labels(groups, envs, assigned, cores)
  by_index = {g.index: g for g in inventory}
  placements = tuple(
      NodePlacement(
          node=node, group=group, label=label, gpus=gpus, env=env,
          gpu_memory_mb=(node_planned_mb(spec, by_index[gpus[0]], overhead_mb)
                         if gpus else 0),
          ray_cpus=spec.ray_cpus, ray_memory_mb=spec.ray_memory_mb,
          ray_resources=spec.ray_resources, cores=node_cores,
          settings=node_settings, threads=spec.omp_threads or len(node_cores),
          devices=spec.num_devices)
      for node, group, label, gpus, env, spec, node_cores, node_settings in zip(
          node_names, groups, labels, assigned, envs, specs, cores, settings))
  used = {i for gpus in assigned for i in gpus}
  return ResourcePlan(placements, usage,
                      tuple(g for g in inventory if g.index not in used),
                      cpu_note)
