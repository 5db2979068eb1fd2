"""Per-node resource plan: which GPUs and cores a process gets, how JAX/TF use them.

Stock Acme lets every process grab most of a GPU, so actors die of
out-of-memory at start, and Launchpad keys `local_resources` by group label
only. Here the plan is data made before anything starts: for every node the
Launchpad label it is added under, the GPUs and cores it gets, its typed
settings (plan/node_env.py) and the string environment its process gets; bad
input raises `LaunchError` with one line. The learner gets as many GPUs of one
model as its learner uses (one JAX process cannot use two models; no shipped
learner pmaps), the other nodes none unless asked, and the memory planned on
each GPU must fit it. The fields of `config.resources`, the CPU and GPU
placement rules and the labels are described in docs/ (resources).
"""

import dataclasses
import os
import re
import shlex
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import ml_collections

from acme_launch import errors
from acme_launch.plan import node_env
from acme_launch.plan.gpu_inventory import GpuInfo, read_inventory  # pylint: disable=unused-import
from acme_launch.plan.node_env import format_cores, parse_core_list  # pylint: disable=unused-import

GROUPS = ('replay', 'counter', 'learner', 'actor', 'evaluator')
ALLOCATORS = ('default', 'platform', 'bfc', 'cuda_async')

# Variables only the planner may set (extra_env must not fight the plan).
_PLANNER_OWNED = ('CUDA_DEVICE_ORDER', 'CUDA_VISIBLE_DEVICES', 'JAX_PLATFORMS',
                  'OMP_NUM_THREADS')
_PLANNER_OWNED_PREFIXES = ('XLA_PYTHON_CLIENT_', node_env.PREFIX)
_ENV_NAME = r'[A-Za-z_][A-Za-z0-9_]*'


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


@dataclasses.dataclass(frozen=True)
class GpuUsage:
  """One GPU's planned memory: what the plan was checked against."""
  gpu: GpuInfo
  planned_mb: int
  nodes: Tuple[str, ...]


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


# Config ---------------------------------------------------------------------


_DEFAULT_ACTOR_FRACTION = 0.1   # JAX's GPU memory cap, every group but the learner.


def _group_defaults(gpus: str, jax_mem_fraction: float) -> ml_collections.ConfigDict:
  group = ml_collections.ConfigDict()
  group.gpus = gpus
  group.jax_preallocate = False
  group.jax_mem_fraction = jax_mem_fraction
  group.jax_allocator = 'default'
  group.tf_gpu = 'none'
  group.intra_op_threads = 0
  group.inter_op_threads = 0
  group.omp_threads = 0
  group.cpus = 'auto'
  group.extra_env = ''
  group.ray_cpus = 1.0
  group.ray_memory_mb = 0
  group.ray_resources = ''
  return group


def default_resources_config() -> ml_collections.ConfigDict:
  """The `resources` section every config embeds; see the module docstring."""
  config = ml_collections.ConfigDict()
  for group in GROUPS:
    learner = group == 'learner'
    config[group] = _group_defaults('auto' if learner else 'none',
                                    0.75 if learner else _DEFAULT_ACTOR_FRACTION)
  config.node_overrides = ''
  config.cuda_context_overhead_mb = 500
  config.oversubscribe_cpus = False
  return config


_FIELDS = tuple(_group_defaults('none', 0.1).keys())
_TOP_LEVEL = ('node_overrides', 'cuda_context_overhead_mb',
              'oversubscribe_cpus')


@dataclasses.dataclass(frozen=True)
class _NodeSpec:
  """One node's validated settings, before GPUs are resolved."""
  gpus: str                       # 'auto', 'none' or '0,1'.
  jax_preallocate: bool
  jax_mem_fraction: float
  jax_allocator: str
  tf_gpu: str                     # Normalized: none | growth | limit:<MB>.
  tf_limit_mb: int
  intra_op_threads: int
  inter_op_threads: int
  omp_threads: int
  extra_env: Tuple[Tuple[str, str], ...]
  ray_cpus: float = 1.0
  ray_memory_mb: int = 0
  ray_resources: Tuple[Tuple[str, float], ...] = ()
  cpus: str = 'auto'              # 'auto', 'all', a count or a core list.
  cpu_count: int = 0              # The count, when cpus is one.
  cpu_list: Tuple[int, ...] = ()  # The cores, when cpus is a list.


def _fail(message: str) -> None:
  raise errors.LaunchError(message)


def _parse_value(raw: str, default, where: str):
  """A node_overrides string as the type of the group field's default."""
  if isinstance(default, bool):
    lowered = raw.lower()
    if lowered in ('true', '1', 'yes'):
      return True
    if lowered in ('false', '0', 'no'):
      return False
    _fail(f'{where}: expected true or false, got {raw!r}')
  try:
    return type(default)(raw)
  except ValueError:
    _fail(f'{where}: expected {type(default).__name__}, got {raw!r}')


def _parse_node_overrides(text: str, nodes: Sequence[str]
                          ) -> Dict[str, Dict[str, Tuple[str, str]]]:
  """node -> field -> (raw value, where) from 'actor/3:gpus=1;...'."""
  overrides: Dict[str, Dict[str, Tuple[str, str]]] = {}
  for entry in filter(None, (e.strip() for e in text.split(';'))):
    match = re.fullmatch(r'([^:\s]+)\s*:\s*(\w+)\s*=(.*)', entry)
    if not match:
      _fail(f'config.resources.node_overrides: cannot read {entry!r}; '
            "expected NODE:FIELD=VALUE entries separated by ';', "
            "e.g. 'actor/3:gpus=1;actor/0:gpus=none'")
    node, field, value = match.group(1), match.group(2), match.group(3).strip()
    where = f'config.resources.node_overrides {node}:{field}'
    group = node.split('/')[0]
    if group not in GROUPS:
      _fail(f'config.resources.node_overrides: unknown group {group!r} in '
            f'{entry!r}; groups: {", ".join(GROUPS)}')
    if node not in nodes:
      _fail(f'config.resources.node_overrides: unknown node {node!r}; this '
            f'config has nodes {", ".join(nodes)}')
    if field not in _FIELDS:
      _fail(f'config.resources.node_overrides: unknown field {field!r} in '
            f'{entry!r}; fields: {", ".join(_FIELDS)}')
    if field in overrides.setdefault(node, {}):
      _fail(f'config.resources.node_overrides sets {node}:{field} twice')
    overrides[node][field] = (value, where)
  return overrides


def _parse_extra_env(text: str, where: str) -> Tuple[Tuple[str, str], ...]:
  pairs = []
  text = text.strip()
  if not text:
    return ()
  for item in re.split(rf',(?=\s*{_ENV_NAME}=)', text):
    match = re.fullmatch(rf'\s*({_ENV_NAME})=(.*)', item, re.DOTALL)
    if not match:
      _fail(f"{where}: cannot read {item!r}; expected 'KEY=VALUE,KEY2=VALUE2'")
    key, value = match.group(1), match.group(2)
    if key in _PLANNER_OWNED or key.startswith(_PLANNER_OWNED_PREFIXES):
      _fail(f'{where} sets {key}, which the resource planner sets; use the '
            'gpus, jax_*, tf_gpu and *_threads fields instead')
    pairs.append((key, value))
  return tuple(pairs)


def _parse_ray_resources(text: str, where: str) -> Tuple[Tuple[str, float], ...]:
  """'host_a:1,ssd:0.5' -> (('host_a', 1.0), ('ssd', 0.5))."""
  pairs = []
  for item in filter(None, (i.strip() for i in str(text).split(','))):
    match = re.fullmatch(r'([A-Za-z_][\w.-]*)\s*:\s*([0-9.eE+-]+)', item)
    amount = None
    if match:
      try:
        amount = float(match.group(2))
      except ValueError:
        pass
    if amount is None or not 0 < amount < float('inf'):
      _fail(f"{where}: cannot read {item!r}; expected 'NAME:AMOUNT' entries "
            "separated by ',' with AMOUNT > 0, e.g. 'gpu_host:1'")
    if match.group(1) in ('CPU', 'GPU', 'memory', 'object_store_memory'):
      _fail(f'{where} names {match.group(1)!r}, a resource Ray sets itself; '
            'use ray_cpus, gpus or ray_memory_mb')
    if match.group(1) in dict(pairs):
      _fail(f'{where} names {match.group(1)!r} twice')
    pairs.append((match.group(1), amount))
  return tuple(pairs)


def parse_tf_gpu(value: str, where: str) -> Tuple[str, int]:
  text = str(value).strip().lower()
  if text in ('none', 'growth'):
    return text, 0
  number = text[len('limit:'):] if text.startswith('limit:') else text
  if number.isdigit() and int(number) > 0:
    return f'limit:{int(number)}', int(number)
  _fail(f"{where} must be 'none', 'growth' or a memory limit in MB such as "
        f"'2048' or 'limit:2048', got {value!r}")


def _check_gpus_field(value: str, where: str) -> str:
  text = str(value).strip().lower().replace(' ', '')
  if text in ('auto', 'none'):
    return text
  indices = text.split(',')
  if not all(i.isdigit() for i in indices):
    _fail(f"{where} must be 'auto', 'none' or GPU indices like '0,1', "
          f'got {value!r}')
  if len(set(indices)) != len(indices):
    _fail(f'{where} lists a GPU twice: {value!r}')
  return ','.join(str(int(i)) for i in indices)


def _parse_cpus(value, where: str) -> Tuple[str, int, Tuple[int, ...]]:
  """(normalized, count, cores) of a cpus field."""
  text = str(value).strip().lower().replace(' ', '')
  if text in ('auto', 'all'):
    return text, 0, ()
  if text.isdigit() and '-' not in text and ',' not in text:
    if int(text) < 1:
      _fail(f"{where} must be 'auto', 'all', a count >= 1 or a core list "
            f"like '0-3,8' (core 0 alone: '0-0'; '5-5' for core 5), "
            f'got {value!r}')
    return text, int(text), ()
  try:
    cores = parse_core_list(text)
  except ValueError:
    _fail(f"{where} must be 'auto', 'all', a count like '2' or a core list "
          f"like '0-3,8' (each core once; one core as '5-5'), got {value!r}")
  return 'list:' + format_cores(cores), 0, cores


def _node_spec(fields: Mapping[str, Tuple[object, str]]) -> _NodeSpec:
  """Validates one node's settings; fields map to (value, where)."""
  value = {name: v for name, (v, _) in fields.items()}
  where = {name: w for name, (_, w) in fields.items()}
  fraction = float(value['jax_mem_fraction'])
  if not 0.0 < fraction <= 1.0:
    _fail(f'{where["jax_mem_fraction"]} must be in (0, 1], got {fraction:g}')
  allocator = str(value['jax_allocator']).strip().lower()
  if allocator not in ALLOCATORS:
    _fail(f'{where["jax_allocator"]} must be one of {", ".join(ALLOCATORS)}, '
          f'got {value["jax_allocator"]!r}')
  for name in ('intra_op_threads', 'inter_op_threads', 'omp_threads'):
    if int(value[name]) < 0:
      _fail(f'{where[name]} must be >= 0 (0 = library default), '
            f'got {value[name]}')
  tf_gpu, tf_limit_mb = parse_tf_gpu(value['tf_gpu'], where['tf_gpu'])
  cpus, cpu_count, cpu_list = _parse_cpus(value['cpus'], where['cpus'])
  ray_cpus = float(value['ray_cpus'])
  if not 0 <= ray_cpus < float('inf'):
    _fail(f'{where["ray_cpus"]} must be >= 0 and finite, got {ray_cpus:g}')
  if int(value['ray_memory_mb']) < 0:
    _fail(f'{where["ray_memory_mb"]} must be >= 0 (0 = none), '
          f'got {value["ray_memory_mb"]}')
  return _NodeSpec(
      gpus=_check_gpus_field(value['gpus'], where['gpus']),
      jax_preallocate=bool(value['jax_preallocate']),
      jax_mem_fraction=fraction,
      jax_allocator=allocator,
      tf_gpu=tf_gpu,
      tf_limit_mb=tf_limit_mb,
      intra_op_threads=int(value['intra_op_threads']),
      inter_op_threads=int(value['inter_op_threads']),
      omp_threads=int(value['omp_threads']),
      extra_env=_parse_extra_env(str(value['extra_env']), where['extra_env']),
      ray_cpus=ray_cpus,
      ray_memory_mb=int(value['ray_memory_mb']),
      ray_resources=_parse_ray_resources(value['ray_resources'],
                                         where['ray_resources']),
      cpus=cpus, cpu_count=cpu_count, cpu_list=cpu_list)


def _node_specs(node_names: Sequence[str], groups: Sequence[str],
                config: ml_collections.ConfigDict) -> List[_NodeSpec]:
  """Group settings, then node overrides, validated, for every node."""
  unknown = sorted(set(config.keys()) - set(GROUPS) - set(_TOP_LEVEL))
  if unknown:
    _fail(f'config.resources has unknown entries {", ".join(unknown)}; '
          f'known: {", ".join(GROUPS + _TOP_LEVEL)}')
  defaults = default_resources_config()
  group_fields = {}
  for group in GROUPS:
    section = config[group] if group in config else defaults[group]
    unknown = sorted(set(section.keys()) - set(_FIELDS))
    if unknown:
      _fail(f'config.resources.{group} has unknown fields '
            f'{", ".join(unknown)}; fields: {", ".join(_FIELDS)}')
    group_fields[group] = {
        name: (section[name] if name in section else defaults[group][name],
               f'config.resources.{group}.{name}') for name in _FIELDS}
  overrides = _parse_node_overrides(
      str(config.get('node_overrides', '')), node_names)
  specs = []
  for node, group in zip(node_names, groups):
    fields = dict(group_fields[group])
    for name, (raw, where) in overrides.get(node, {}).items():
      fields[name] = (_parse_value(raw, defaults[group][name], where), where)
    specs.append(_node_spec(fields))
  return specs


# GPU placement ----------------------------------------------------------------


def _describe(gpus: Sequence[GpuInfo]) -> str:
  return ', '.join(f'{g.index} ({g.name})' for g in gpus)


def _describe_by_model(gpus: Sequence[GpuInfo]) -> str:
  by_model: Dict[str, List[int]] = {}
  for gpu in gpus:
    by_model.setdefault(gpu.name, []).append(gpu.index)
  return '; '.join(f'{", ".join(map(str, indices))} ({name})'
                   for name, indices in by_model.items())


def _learner_gpus(inventory: Sequence[GpuInfo], devices: int) -> Tuple[int, ...]:
  """The learner's 'auto': `devices` GPUs of one model (fewer if no model has
  that many), from the model with the most of them, then the most memory."""
  by_model: Dict[str, List[GpuInfo]] = {}
  for gpu in inventory:
    by_model.setdefault(gpu.name, []).append(gpu)
  if not by_model:
    return ()
  best = max(by_model.values(),
             key=lambda gs: (min(len(gs), devices), min(g.memory_mb for g in gs),
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
      _fail(f'{node} asks for GPU {index}, which this machine does not have; '
            f'it has {have}')
  models = {by_index[i].name for i in indices}
  if len(models) > 1:
    _fail(f'{node} would see GPUs {_describe([by_index[i] for i in indices])}: '
          'one JAX process cannot use two GPU models; give it GPUs of one model')
  return indices


def _assign_gpus(node_names: Sequence[str], groups: Sequence[str],
                 specs: Sequence[_NodeSpec], inventory: Sequence[GpuInfo],
                 learner_devices: int) -> List[Tuple[int, ...]]:
  by_index = {g.index: g for g in inventory}
  assigned: List[Optional[Tuple[int, ...]]] = []
  for node, group, spec in zip(node_names, groups, specs):
    if spec.gpus == 'none':
      assigned.append(())
    elif spec.gpus == 'auto':
      assigned.append(_learner_gpus(inventory, learner_devices)
                      if group == 'learner' else None)
    else:
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


def _planned_mb(spec: _NodeSpec, gpu: GpuInfo, overhead_mb: int) -> int:
  return (int(round(spec.jax_mem_fraction * gpu.memory_mb)) + overhead_mb +
          spec.tf_limit_mb)


def _gpu_usage(node_names, specs, assigned, inventory, overhead_mb
               ) -> Tuple[GpuUsage, ...]:
  """Per GPU, the planned memory; refuses a GPU that would overflow."""
  usage = []
  for gpu in inventory:
    on_it = [(node, _planned_mb(spec, gpu, overhead_mb))
             for node, spec, gpus in zip(node_names, specs, assigned)
             if gpu.index in gpus]
    total = sum(mb for _, mb in on_it)
    if total > gpu.memory_mb:
      parts = ' + '.join(f'{node} {mb}' for node, mb in on_it)
      _fail(f'GPU {gpu.index} ({gpu.name}, {gpu.memory_mb} MB) is '
            f'over-committed: {parts} = {total} MB (JAX fraction of the GPU + '
            f'{overhead_mb} MB CUDA context + TF limit per process); lower '
            'jax_mem_fraction or place fewer nodes on it')
    if on_it:
      usage.append(GpuUsage(gpu, total, tuple(node for node, _ in on_it)))
  return tuple(usage)


# CPU placement --------------------------------------------------------------------

# 'auto' nodes with a core of their own; the others share one.
_OWN_CORE_GROUPS = ('learner', 'replay', 'actor')


def _claim_explicit_cores(node_names, specs, host: Tuple[int, ...],
                          oversubscribe: bool
                          ) -> Tuple[List[Optional[Tuple[int, ...]]], List[int]]:
  """Core lists as given, then counts from the free cores, in node order.

  Returns each node's cores (None where not yet decided) and the free cores.
  """
  have = f'this launcher may use cores {format_cores(host)}'
  assigned: List[Optional[Tuple[int, ...]]] = [None] * len(specs)
  claimed: Dict[int, str] = {}
  for n, (node, spec) in enumerate(zip(node_names, specs)):
    if not spec.cpu_list:
      continue
    missing = [c for c in spec.cpu_list if c not in host]
    if missing:
      _fail(f'{node} asks for cores {format_cores(spec.cpu_list)}, but {have} '
            f'(os.sched_getaffinity); core {missing[0]} is not among them')
    for core in spec.cpu_list:
      if core in claimed and not oversubscribe:
        _fail(f'{node} and {claimed[core]} both ask for core {core}; give them '
              'disjoint core lists or set '
              'config.resources.oversubscribe_cpus=true')
      claimed.setdefault(core, node)
    assigned[n] = spec.cpu_list
  free = [c for c in host if c not in claimed]
  use = {c: (1 if c in claimed else 0) for c in host}
  for n, (node, spec) in enumerate(zip(node_names, specs)):
    if not spec.cpu_count:
      continue
    if spec.cpu_count > len(host):
      _fail(f'{node} asks for {spec.cpu_count} cores, but {have}')
    if len(free) >= spec.cpu_count:
      cores = tuple(free[:spec.cpu_count])
      free = free[spec.cpu_count:]
    elif oversubscribe:
      cores = tuple(sorted(sorted(host, key=lambda c: (use[c], c))
                           [:spec.cpu_count]))
      free = [c for c in free if c not in cores]
    else:
      wanted = sum(s.cpu_count + len(s.cpu_list) for s in specs)
      _fail(f'the CPU plan asks for {wanted} cores (counts and core lists '
            f'of config.resources), but {have}; ask for fewer or set '
            'config.resources.oversubscribe_cpus=true')
    for core in cores:
      use[core] += 1
    assigned[n] = cores
  return assigned, free


def _assign_cores(node_names: Sequence[str], groups: Sequence[str],
                  specs: Sequence[_NodeSpec],
                  host_cores: Optional[Sequence[int]], oversubscribe: bool
                  ) -> Tuple[List[Tuple[int, ...]], str]:
  """Each node's cores (empty: not pinned) and a line saying how."""
  if host_cores is None:
    for node, spec in zip(node_names, specs):
      if spec.cpus not in ('auto', 'all'):
        _fail(f'{node} has cpus={spec.cpus.replace("list:", "")!r}: only '
              "--launch_type=local_mp pins cores; use 'auto' or 'all'")
    return [()] * len(specs), 'cores: not pinned (local_mp pins them)'
  host = tuple(sorted(host_cores))
  assigned, free = _claim_explicit_cores(node_names, specs, host, oversubscribe)
  auto = [n for n, spec in enumerate(specs) if spec.cpus == 'auto']
  own = [n for n in auto if groups[n] in _OWN_CORE_GROUPS]
  shared = [n for n in auto if groups[n] not in _OWN_CORE_GROUPS]
  note = ''
  if auto and len(free) >= max(len(own), 1):
    # The learner first, so that it gets the cores left over next to its own.
    own.sort(key=lambda n: _OWN_CORE_GROUPS.index(groups[n]))
    spare = len(free) - len(own) - (1 if shared and own else 0)
    for n in own:
      take = 1 + (spare if groups[n] == 'learner' and spare > 0 else 0)
      assigned[n], free = tuple(free[:take]), free[take:]
      if take > 1:
        spare = 0
    if shared:
      replay = [assigned[n] for n in own if groups[n] == 'replay']
      core = free[:1] or (replay[0][:1] if replay else assigned[own[0]][:1])
      for n in shared:
        assigned[n] = tuple(core)
    note = (f'cores: pinned ({len(host)} the launcher may use: '
            f'{format_cores(host)})')
  elif auto:
    note = (f'cores: not pinned: the automatic plan needs {len(own)} '
            'cores (one each for the learner, the replay and every actor), '
            f'{len(free)} left of the launcher\'s {format_cores(host)}; every '
            'process may run on any of them')
  if not note:
    note = f'cores: as configured (the launcher may use {format_cores(host)})'
  return [cores or () for cores in assigned], note


# Environment and labels ---------------------------------------------------------


def _settings(spec: _NodeSpec, cores: Tuple[int, ...]) -> node_env.NodeEnv:
  return node_env.NodeEnv(
      cpus=tuple(cores), tf_gpu=spec.tf_gpu,
      # Pinned: as many threads as its cores, unless the config says.
      tf_intra_op_threads=spec.intra_op_threads or len(cores),
      tf_inter_op_threads=spec.inter_op_threads or len(cores))


def _env(spec: _NodeSpec, gpus: Tuple[int, ...], cores: Tuple[int, ...],
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
                   learner_devices: int = 1,
                   host_cores: Optional[Sequence[int]] = None) -> ResourcePlan:
  """Places each (group, index) node; raises LaunchError on bad input.

  `learner_devices`: how many devices the agent's learner uses (its
  adapter's LEARNER_DEVICES). `host_cores`: the cores the nodes may be
  pinned to (the launcher's own, local_mp); None pins nothing."""
  groups = [group for group, _ in nodes]
  node_names = [f'{group}/{index}' for group, index in nodes]
  for group in groups:
    if group not in GROUPS:
      _fail(f'unknown node group {group!r}; groups: {", ".join(GROUPS)}')
  overhead_mb = int(resources_config.get('cuda_context_overhead_mb', 500))
  if overhead_mb < 0:
    _fail('config.resources.cuda_context_overhead_mb must be >= 0, '
          f'got {overhead_mb}')
  specs = _node_specs(node_names, groups, resources_config)
  assigned = _assign_gpus(node_names, groups, specs, inventory,
                          learner_devices)
  usage = _gpu_usage(node_names, specs, assigned, inventory, overhead_mb)
  cores, cpu_note = _assign_cores(
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
          gpu_memory_mb=(_planned_mb(spec, by_index[gpus[0]], overhead_mb)
                         if gpus else 0),
          ray_cpus=spec.ray_cpus, ray_memory_mb=spec.ray_memory_mb,
          ray_resources=spec.ray_resources, cores=node_cores,
          settings=node_settings, threads=spec.omp_threads or len(node_cores))
      for node, group, label, gpus, env, spec, node_cores, node_settings in zip(
          node_names, groups, labels, assigned, envs, specs, cores, settings))
  used = {i for gpus in assigned for i in gpus}
  return ResourcePlan(placements, usage,
                      tuple(g for g in inventory if g.index not in used),
                      cpu_note)


# Display ------------------------------------------------------------------------


def _columns(p: NodePlacement) -> Tuple[str, ...]:
  env = p.env
  gpus = ','.join(map(str, p.gpus)) or 'cpu'
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
  if plan.gpu_usage:
    lines.append('\nGPU memory planned (JAX fraction + CUDA context + TF limit):')
    for u in plan.gpu_usage:
      lines.append(f'  GPU {u.gpu.index} {u.gpu.name}: {u.planned_mb} of '
                   f'{u.gpu.memory_mb} MB ({", ".join(u.nodes)})')
  else:
    lines.append('\nno GPU used: every node runs on the CPU.')
  if plan.idle_gpus:
    lines.append(
        f'idle GPUs: {_describe_by_model(plan.idle_gpus)}. The learner gets '
        'the devices its learner uses (its adapter\'s LEARNER_DEVICES, 1 for '
        'every shipped agent); to run the actors\' batched policy on the idle '
        'ones: --config.resources.actor.gpus=auto (one GPU each, round-robin, '
        f'jax_mem_fraction {_DEFAULT_ACTOR_FRACTION:g} each).')
  lines.append('\nenvironment per label:')
  nodes_by_label: Dict[str, List[str]] = {}
  for p in plan.placements:
    nodes_by_label.setdefault(p.label, []).append(p.node)
  for label, env in plan.env_by_label().items():
    assignments = ' '.join(f'{k}={shlex.quote(v)}' for k, v in sorted(env.items()))
    lines.append(f'  {label} ({", ".join(nodes_by_label[label])}): {assignments}')
  return '\n'.join(lines)
