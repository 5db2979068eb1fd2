"""The `resources` config: its defaults and its parsing into per-node specs.

Reads each group's fields and the node overrides, checks them and gives one
validated `NodeSpec` per node; bad input raises `LaunchError` with one line.
The learner's section has one field more, `num_devices`: how many devices
of one kind its one process runs on (`learner_num_devices`).
"""

import dataclasses
import re
from typing import Dict, List, Mapping, Sequence, Tuple

import ml_collections

from acme_launch import credentials
from acme_launch import errors
from acme_launch.plan import node_env
from acme_launch.plan.node_env import format_cores, parse_core_list

GROUPS = ('replay', 'counter', 'learner', 'inference', 'actor', 'evaluator')
ALLOCATORS = ('default', 'platform', 'bfc', 'cuda_async')

# Variables only the planner may set (extra_env must not fight the plan).
_PLANNER_OWNED = ('CUDA_DEVICE_ORDER', 'CUDA_VISIBLE_DEVICES', 'JAX_PLATFORMS',
                  'OMP_NUM_THREADS')
_PLANNER_OWNED_PREFIXES = ('XLA_PYTHON_CLIENT_', node_env.PREFIX)
_ENV_NAME = r'[A-Za-z_][A-Za-z0-9_]*'
# The XLA flag that splits a CPU into virtual devices: the planner sets it
# from the learner's num_devices (an extra_env XLA_FLAGS may hold others).
FORCE_HOST_DEVICES = '--xla_force_host_platform_device_count'


DEFAULT_ACTOR_FRACTION = 0.1   # JAX's GPU memory cap, every group but the learner.


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
  group.pass_env = ''
  group.ray_cpus = 1.0
  group.ray_memory_mb = 0
  group.ray_resources = ''
  return group


def default_resources_config() -> ml_collections.ConfigDict:
  """The `resources` section every config embeds; see the module docstring."""
  config = ml_collections.ConfigDict()
  for group in GROUPS:
    learner = group == 'learner'
    # The inference node (config.inference='central') takes a GPU where
    # there is one: one the learner leaves free, else the learner's.
    config[group] = _group_defaults(
        'auto' if group in ('learner', 'inference') else 'none',
        0.75 if learner else DEFAULT_ACTOR_FRACTION)
  # The learner's devices (GPUs of one model, or virtual CPU devices): its
  # agent must be able to use them (prepare.py checks its adapter).
  config.learner.num_devices = 1
  config.node_overrides = ''
  config.cuda_context_overhead_mb = 500
  config.oversubscribe_cpus = False
  return config


_FIELDS = tuple(_group_defaults('none', 0.1).keys())
_LEARNER_FIELDS = _FIELDS + ('num_devices',)
_TOP_LEVEL = ('node_overrides', 'cuda_context_overhead_mb',
              'oversubscribe_cpus')


@dataclasses.dataclass(frozen=True)
class NodeSpec:
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
  pass_env: Tuple[str, ...] = ()  # Withheld variables kept (credentials.py).
  ray_cpus: float = 1.0
  ray_memory_mb: int = 0
  ray_resources: Tuple[Tuple[str, float], ...] = ()
  cpus: str = 'auto'              # 'auto', 'all', a count or a core list.
  cpu_count: int = 0              # The count, when cpus is one.
  cpu_list: Tuple[int, ...] = ()  # The cores, when cpus is a list.
  num_devices: int = 1            # JAX devices of its process (the learner's).


def fail(message: str) -> None:
  raise errors.LaunchError(message)


def _parse_value(raw: str, default, where: str):
  """A node_overrides string as the type of the group field's default."""
  if isinstance(default, bool):
    lowered = raw.lower()
    if lowered in ('true', '1', 'yes'):
      return True
    if lowered in ('false', '0', 'no'):
      return False
    fail(f'{where}: expected true or false, got {raw!r}')
  try:
    return type(default)(raw)
  except ValueError:
    fail(f'{where}: expected {type(default).__name__}, got {raw!r}')


def _parse_node_overrides(text: str, nodes: Sequence[str]
                          ) -> Dict[str, Dict[str, Tuple[str, str]]]:
  """node -> field -> (raw value, where) from 'actor/3:gpus=1;...'."""
  overrides: Dict[str, Dict[str, Tuple[str, str]]] = {}
  for entry in filter(None, (e.strip() for e in text.split(';'))):
    match = re.fullmatch(r'([^:\s]+)\s*:\s*(\w+)\s*=(.*)', entry)
    if not match:
      fail(f'config.resources.node_overrides: cannot read {entry!r}; '
            "expected NODE:FIELD=VALUE entries separated by ';', "
            "e.g. 'actor/3:gpus=1;actor/0:gpus=none'")
    node, field, value = match.group(1), match.group(2), match.group(3).strip()
    where = f'config.resources.node_overrides {node}:{field}'
    group = node.split('/')[0]
    if group not in GROUPS:
      fail(f'config.resources.node_overrides: unknown group {group!r} in '
            f'{entry!r}; groups: {", ".join(GROUPS)}')
    if node not in nodes:
      fail(f'config.resources.node_overrides: unknown node {node!r}; this '
            f'config has nodes {", ".join(nodes)}')
    if field == 'num_devices':
      fail(f'config.resources.node_overrides: {entry!r}: num_devices is '
           'the learner\'s, set as config.resources.learner.num_devices')
    if field not in _FIELDS:
      fail(f'config.resources.node_overrides: unknown field {field!r} in '
            f'{entry!r}; fields: {", ".join(_FIELDS)}')
    if field in overrides.setdefault(node, {}):
      fail(f'config.resources.node_overrides sets {node}:{field} twice')
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
      fail(f"{where}: cannot read {item!r}; expected 'KEY=VALUE,KEY2=VALUE2'")
    key, value = match.group(1), match.group(2)
    if key in _PLANNER_OWNED or key.startswith(_PLANNER_OWNED_PREFIXES):
      fail(f'{where} sets {key}, which the resource planner sets; use the '
            'gpus, jax_*, tf_gpu and *_threads fields instead')
    if credentials.is_withheld(key, value):
      fail(f'{where} sets {key}, a credential by its name or value: '
           'extra_env values are written to config.json and printed by '
           f'--dry_run; export it and name it in pass_env instead '
           f'(config.resources.GROUP.pass_env={key})')
    if key == 'XLA_FLAGS' and FORCE_HOST_DEVICES in value:
      fail(f'{where} sets {FORCE_HOST_DEVICES} in XLA_FLAGS, which the '
           'resource planner sets: use config.resources.learner.num_devices')
    pairs.append((key, value))
  return tuple(pairs)


def _parse_pass_env(text: str, where: str) -> Tuple[str, ...]:
  """'WANDB_API_KEY,AWS_*' -> ('WANDB_API_KEY', 'AWS_*'): names, or
  patterns with * and ?, of variables the node keeps."""
  names = []
  for item in filter(None, (i.strip() for i in str(text).split(','))):
    if not re.fullmatch(r'[A-Za-z_*?][A-Za-z0-9_*?]*', item):
      fail(f"{where}: cannot read {item!r}; expected variable names or "
           "patterns separated by ',', e.g. 'HF_TOKEN,AWS_*' (names only: "
           'the values come from the environment)')
    if item not in names:
      names.append(item)
  return tuple(names)


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
      fail(f"{where}: cannot read {item!r}; expected 'NAME:AMOUNT' entries "
            "separated by ',' with AMOUNT > 0, e.g. 'gpu_host:1'")
    if match.group(1) in ('CPU', 'GPU', 'memory', 'object_store_memory'):
      fail(f'{where} names {match.group(1)!r}, a resource Ray sets itself; '
            'use ray_cpus, gpus or ray_memory_mb')
    if match.group(1) in dict(pairs):
      fail(f'{where} names {match.group(1)!r} twice')
    pairs.append((match.group(1), amount))
  return tuple(pairs)


def parse_tf_gpu(value: str, where: str) -> Tuple[str, int]:
  text = str(value).strip().lower()
  if text in ('none', 'growth'):
    return text, 0
  number = text[len('limit:'):] if text.startswith('limit:') else text
  if number.isdigit() and int(number) > 0:
    return f'limit:{int(number)}', int(number)
  fail(f"{where} must be 'none', 'growth' or a memory limit in MB such as "
        f"'2048' or 'limit:2048', got {value!r}")


def _check_gpus_field(value: str, where: str) -> str:
  text = str(value).strip().lower().replace(' ', '')
  if text in ('auto', 'none'):
    return text
  indices = text.split(',')
  if not all(i.isdigit() for i in indices):
    fail(f"{where} must be 'auto', 'none' or GPU indices like '0,1', "
          f'got {value!r}')
  if len(set(indices)) != len(indices):
    fail(f'{where} lists a GPU twice: {value!r}')
  return ','.join(str(int(i)) for i in indices)


def _parse_cpus(value, where: str) -> Tuple[str, int, Tuple[int, ...]]:
  """(normalized, count, cores) of a cpus field."""
  text = str(value).strip().lower().replace(' ', '')
  if text in ('auto', 'all'):
    return text, 0, ()
  if text.isdigit() and '-' not in text and ',' not in text:
    if int(text) < 1:
      fail(f"{where} must be 'auto', 'all', a count >= 1 or a core list "
            f"like '0-3,8' (core 0 alone: '0-0'; '5-5' for core 5), "
            f'got {value!r}')
    return text, int(text), ()
  try:
    cores = parse_core_list(text)
  except ValueError:
    fail(f"{where} must be 'auto', 'all', a count like '2' or a core list "
          f"like '0-3,8' (each core once; one core as '5-5'), got {value!r}")
  return 'list:' + format_cores(cores), 0, cores


def _node_spec(fields: Mapping[str, Tuple[object, str]]) -> NodeSpec:
  """Validates one node's settings; fields map to (value, where)."""
  value = {name: v for name, (v, _) in fields.items()}
  where = {name: w for name, (_, w) in fields.items()}
  fraction = float(value['jax_mem_fraction'])
  if not 0.0 < fraction <= 1.0:
    fail(f'{where["jax_mem_fraction"]} must be in (0, 1], got {fraction:g}')
  allocator = str(value['jax_allocator']).strip().lower()
  if allocator not in ALLOCATORS:
    fail(f'{where["jax_allocator"]} must be one of {", ".join(ALLOCATORS)}, '
          f'got {value["jax_allocator"]!r}')
  for name in ('intra_op_threads', 'inter_op_threads', 'omp_threads'):
    if int(value[name]) < 0:
      fail(f'{where[name]} must be >= 0 (0 = library default), '
            f'got {value[name]}')
  tf_gpu, tf_limit_mb = parse_tf_gpu(value['tf_gpu'], where['tf_gpu'])
  cpus, cpu_count, cpu_list = _parse_cpus(value['cpus'], where['cpus'])
  ray_cpus = float(value['ray_cpus'])
  if not 0 <= ray_cpus < float('inf'):
    fail(f'{where["ray_cpus"]} must be >= 0 and finite, got {ray_cpus:g}')
  if int(value['ray_memory_mb']) < 0:
    fail(f'{where["ray_memory_mb"]} must be >= 0 (0 = none), '
          f'got {value["ray_memory_mb"]}')
  return NodeSpec(
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
      pass_env=_parse_pass_env(value['pass_env'], where['pass_env']),
      ray_cpus=ray_cpus,
      ray_memory_mb=int(value['ray_memory_mb']),
      ray_resources=_parse_ray_resources(value['ray_resources'],
                                         where['ray_resources']),
      cpus=cpus, cpu_count=cpu_count, cpu_list=cpu_list,
      num_devices=_parse_num_devices(*fields['num_devices'])
      if 'num_devices' in fields else 1)


def _parse_num_devices(value, where: str) -> int:
  text = str(value).strip()
  if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
    fail(f'{where} must be a count >= 1 (the learner\'s devices), '
         f'got {value!r}')
  return int(text)


def learner_num_devices(config: ml_collections.ConfigDict) -> int:
  """The devices the learner runs on, from a whole experiment config:
  `config.resources.learner.num_devices` (1 in configs saved before the
  field). The agents split their batch by it; plan_resources checks it."""
  learner = config.resources.get('learner') or {}
  return _parse_num_devices(learner.get('num_devices', 1),
                            'config.resources.learner.num_devices')


def node_specs(node_names: Sequence[str], groups: Sequence[str],
                config: ml_collections.ConfigDict) -> List[NodeSpec]:
  """Group settings, then node overrides, validated, for every node."""
  unknown = sorted(set(config.keys()) - set(GROUPS) - set(_TOP_LEVEL))
  if unknown:
    fail(f'config.resources has unknown entries {", ".join(unknown)}; '
          f'known: {", ".join(GROUPS + _TOP_LEVEL)}')
  defaults = default_resources_config()
  group_fields = {}
  for group in GROUPS:
    section = config[group] if group in config else defaults[group]
    fields = _LEARNER_FIELDS if group == 'learner' else _FIELDS
    unknown = sorted(set(section.keys()) - set(fields))
    if unknown:
      fail(f'config.resources.{group} has unknown fields '
            f'{", ".join(unknown)}; fields: {", ".join(fields)}')
    group_fields[group] = {
        name: (section[name] if name in section else defaults[group][name],
               f'config.resources.{group}.{name}') for name in fields}
  overrides = _parse_node_overrides(
      str(config.get('node_overrides', '')), node_names)
  specs = []
  for node, group in zip(node_names, groups):
    fields = dict(group_fields[group])
    for name, (raw, where) in overrides.get(node, {}).items():
      fields[name] = (_parse_value(raw, defaults[group][name], where), where)
    specs.append(_node_spec(fields))
  return specs
