"""GPU placement: which GPUs each node sees, and the memory planned on each.

The learner gets `num_devices` GPUs of one model (JAX cannot pmap over two
models), or none on a machine without GPUs: its devices are then virtual
CPU devices (resources.py sets the XLA flag)."""

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from acme_launch.plan.gpu_inventory import GpuInfo
from acme_launch.plan.specs import NodeSpec, fail


@dataclasses.dataclass(frozen=True)
class GpuUsage:
  """One GPU's planned memory: what the plan was checked against."""
  gpu: GpuInfo
  planned_mb: int
  nodes: Tuple[str, ...]


def _describe(gpus: Sequence[GpuInfo]) -> str:
  return ', '.join(f'{g.index} ({g.name})' for g in gpus)


def describe_by_model(gpus: Sequence[GpuInfo]) -> str:
  by_model: Dict[str, List[int]] = {}
  for gpu in gpus:
    by_model.setdefault(gpu.name, []).append(gpu.index)
  return '; '.join(f'{", ".join(map(str, indices))} ({name})'
                   for name, indices in by_model.items())


def _learner_gpus(inventory: Sequence[GpuInfo], devices: int) -> Tuple[int, ...]:
  """The learner's 'auto': `devices` GPUs of one model, from the model with
  the most memory among those that have that many (then the lowest
  indices); none on a machine without GPUs (its devices are then the CPU's).
  Refuses a machine whose GPUs are no `devices` of one model."""
  by_model: Dict[str, List[GpuInfo]] = {}
  for gpu in inventory:
    by_model.setdefault(gpu.name, []).append(gpu)
  if not by_model:
    return ()
  enough = [gs for gs in by_model.values() if len(gs) >= devices]
  if not enough:
    fail(f'config.resources.learner.num_devices={devices}: the learner needs '
         f'{devices} GPUs of one model (one JAX process cannot use two '
         f'models) and this machine has {describe_by_model(inventory)}; '
         'lower num_devices, or set config.resources.learner.gpus=none to '
         f'run its {devices} devices on the CPU')
  best = max(enough, key=lambda gs: (min(g.memory_mb for g in gs),
                                     -min(g.index for g in gs)))
  return tuple(sorted(g.index for g in best))[:devices]


def _explicit_gpus(node: str, text: str, by_index: Mapping[int, GpuInfo]
                   ) -> Tuple[int, ...]:
  indices = tuple(int(i) for i in text.split(','))
  for index in indices:
    if index not in by_index:
      have = (f'GPUs {", ".join(map(str, sorted(by_index)))}' if by_index
              else 'no GPUs (none found; plan another machine with '
              '--gpu_inventory=FILE)')
      fail(f'{node} asks for GPU {index}, which this machine does not have; '
            f'it has {have}')
  models = {by_index[i].name for i in indices}
  if len(models) > 1:
    fail(f'{node} would see GPUs {_describe([by_index[i] for i in indices])}: '
          'one JAX process cannot use two GPU models; give it GPUs of one model')
  return indices


def _check_learner_list(spec: NodeSpec, agent: str) -> None:
  """A learner's GPU list names as many GPUs as it has devices."""
  listed = len(spec.gpus.split(','))
  if listed != spec.num_devices:
    fail(f'config.resources.learner.gpus={spec.gpus} lists {listed} GPU'
         f'{"s" if listed > 1 else ""} for a learner of '
         f'config.resources.learner.num_devices={spec.num_devices}'
         f'{f" (agent {agent})" if agent else ""}: list '
         f'{spec.num_devices}, or set num_devices={listed} for an agent '
         'whose learner uses that many (docs/resources-and-gpus.md)')


def assign_gpus(node_names: Sequence[str], groups: Sequence[str],
                 specs: Sequence[NodeSpec], inventory: Sequence[GpuInfo],
                 agent: str = '') -> List[Tuple[int, ...]]:
  """Each node's GPUs: the learner's `num_devices` of one model ('auto'),
  none, or the ones listed. `agent` names the agent in refusals."""
  by_index = {g.index: g for g in inventory}
  assigned: List[Optional[Tuple[int, ...]]] = []
  for node, group, spec in zip(node_names, groups, specs):
    if spec.gpus == 'none':
      assigned.append(())
    elif spec.gpus == 'auto':
      assigned.append(_learner_gpus(inventory, spec.num_devices)
                      if group == 'learner' else None)
    else:
      if group == 'learner':
        _check_learner_list(spec, agent)
      assigned.append(_explicit_gpus(node, spec.gpus, by_index))
  learner_gpus = {i for group, gpus in zip(groups, assigned)
                  if group == 'learner' and gpus for i in gpus}
  pool = ([g.index for g in inventory if g.index not in learner_gpus] or
          [g.index for g in inventory])
  next_gpu = 0
  for n, gpus in enumerate(assigned):
    if gpus is None:  # 'auto' outside the learner: round-robin over the pool.
      assigned[n] = (pool[next_gpu % len(pool)],) if pool else ()
      next_gpu += 1
  return assigned


def node_planned_mb(spec: NodeSpec, gpu: GpuInfo, overhead_mb: int) -> int:
  return (int(round(spec.jax_mem_fraction * gpu.memory_mb)) + overhead_mb +
          spec.tf_limit_mb)


def plan_gpu_usage(node_names, specs, assigned, inventory, overhead_mb
               ) -> Tuple[GpuUsage, ...]:
  """Per GPU, the planned memory; refuses a GPU that would overflow."""
  usage = []
  for gpu in inventory:
    on_it = [(node, node_planned_mb(spec, gpu, overhead_mb))
             for node, spec, gpus in zip(node_names, specs, assigned)
             if gpu.index in gpus]
    total = sum(mb for _, mb in on_it)
    if total > gpu.memory_mb:
      parts = ' + '.join(f'{node} {mb}' for node, mb in on_it)
      fail(f'GPU {gpu.index} ({gpu.name}, {gpu.memory_mb} MB) is '
            f'over-committed: {parts} = {total} MB (JAX fraction of the GPU + '
            f'{overhead_mb} MB CUDA context + TF limit per process); lower '
            'jax_mem_fraction or place fewer nodes on it')
    if on_it:
      usage.append(GpuUsage(gpu, total, tuple(node for node, _ in on_it)))
  return tuple(usage)
