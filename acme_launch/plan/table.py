"""The resource plan as fixed-width text, for --dry_run."""

from __future__ import annotations

import shlex
from typing import Dict, List, Tuple

from acme_launch.plan.gpus import describe_by_model
from acme_launch.plan.node_env import format_cores
from acme_launch.plan.resources import NodePlacement, ResourcePlan
from acme_launch.plan.specs import DEFAULT_ACTOR_FRACTION


def _columns(p: NodePlacement) -> Tuple[str, ...]:
  env = p.env
  gpus = ','.join(map(str, p.gpus)) or (
      f'cpu x{p.devices}' if p.devices > 1 else 'cpu')
  if p.gpus:
    jax = env.get('XLA_PYTHON_CLIENT_MEM_FRACTION', '?')
    if env.get('XLA_PYTHON_CLIENT_PREALLOCATE') == 'true':
      jax += ' prealloc'
    if env.get('XLA_PYTHON_CLIENT_ALLOCATOR', 'default') != 'default':
      jax += ' ' + env['XLA_PYTHON_CLIENT_ALLOCATOR']
  else:
    jax = '-'
  threads = '/'.join(str(n or '-') for n in (
      p.settings.tf_intra_op_threads, p.settings.tf_inter_op_threads,
      p.threads))
  memory = str(p.gpu_memory_mb) if p.gpus else '-'
  cores = format_cores(p.cores) if p.cores else 'any'
  return (p.node, p.label, cores, gpus, jax, memory,
          p.settings.tf_gpu, threads)


def format_plan(plan: ResourcePlan) -> str:
  """Plain fixed-width text for --dry_run: nodes, GPU memory, environments."""
  header = ('node', 'label', 'cores', 'gpus', 'jax mem', 'MB/gpu', 'tf gpu',
            'threads intra/inter/omp')
  rows = [header] + [_columns(p) for p in plan.placements]
  widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
  lines = ['  '.join(cell.ljust(w) for cell, w in zip(row, widths)) +
           '  ' + row[-1] for row in rows]
  if plan.cpu_note:
    lines.append('\n' + plan.cpu_note)
  for p in plan.placements:
    if p.group == 'learner' and p.devices > 1:
      where = (f'GPUs {",".join(map(str, p.gpus))}' if p.gpus
               else 'virtual CPU devices, by XLA_FLAGS')
      lines.append(f'\n{p.node} runs on {p.devices} devices ({where}); '
                   'the impala and r2d2 learners give each batch_size / '
                   f'{p.devices} of a step\'s batch')
  if plan.gpu_usage:
    lines.append('\nGPU memory planned (JAX fraction + CUDA context + TF limit):')
    for u in plan.gpu_usage:
      lines.append(f'  GPU {u.gpu.index} {u.gpu.name}: {u.planned_mb} of '
                   f'{u.gpu.memory_mb} MB ({", ".join(u.nodes)})')
  else:
    lines.append('\nno GPU used: every node runs on the CPU.')
  if plan.idle_gpus:
    lines.append(
        f'idle GPUs: {describe_by_model(plan.idle_gpus)}. The learner gets '
        'config.resources.learner.num_devices GPUs of one model (default 1; '
        'the impala and r2d2 learners take any number, each device a share '
        'of the batch); to run the actors\' batched policy on the idle '
        'ones: --config.resources.actor.gpus=auto (one GPU each, round-robin, '
        f'jax_mem_fraction {DEFAULT_ACTOR_FRACTION:g} each).')
  lines.append('\nenvironment per label:')
  nodes_by_label: Dict[str, List[str]] = {}
  for p in plan.placements:
    nodes_by_label.setdefault(p.label, []).append(p.node)
  for label, env in plan.env_by_label().items():
    assignments = ' '.join(f'{k}={shlex.quote(v)}' for k, v in sorted(env.items()))
    lines.append(f'  {label} ({", ".join(nodes_by_label[label])}): {assignments}')
  return '\n'.join(lines)
