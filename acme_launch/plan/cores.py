"""CPU placement: which host cores each node is pinned to (local_mp)."""

from typing import Dict, List, Optional, Sequence, Tuple

from acme_launch.plan.node_env import format_cores
from acme_launch.plan.specs import NodeSpec, fail

# 'auto' nodes with a core of their own; the others share one.
_OWN_CORE_GROUPS = ('learner', 'replay', 'inference', 'actor')


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
      fail(f'{node} asks for cores {format_cores(spec.cpu_list)}, but {have} '
            f'(os.sched_getaffinity); core {missing[0]} is not among them')
    for core in spec.cpu_list:
      if core in claimed and not oversubscribe:
        fail(f'{node} and {claimed[core]} both ask for core {core}; give them '
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
      fail(f'{node} asks for {spec.cpu_count} cores, but {have}')
    if len(free) >= spec.cpu_count:
      cores = tuple(free[:spec.cpu_count])
      free = free[spec.cpu_count:]
    elif oversubscribe:
      cores = tuple(sorted(sorted(host, key=lambda c: (use[c], c))
                           [:spec.cpu_count]))
      free = [c for c in free if c not in cores]
    else:
      wanted = sum(s.cpu_count + len(s.cpu_list) for s in specs)
      fail(f'the CPU plan asks for {wanted} cores (counts and core lists '
            f'of config.resources), but {have}; ask for fewer or set '
            'config.resources.oversubscribe_cpus=true')
    for core in cores:
      use[core] += 1
    assigned[n] = cores
  return assigned, free


def assign_cores(node_names: Sequence[str], groups: Sequence[str],
                  specs: Sequence[NodeSpec],
                  host_cores: Optional[Sequence[int]], oversubscribe: bool
                  ) -> Tuple[List[Tuple[int, ...]], str]:
  """Each node's cores (empty: not pinned) and a line saying how."""
  if host_cores is None:
    for node, spec in zip(node_names, specs):
      if spec.cpus not in ('auto', 'all'):
        fail(f'{node} has cpus={spec.cpus.replace("list:", "")!r}: only '
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
    # Then a second core for every actor, when there are enough for all:
    # its environments' worker thread and its loop each keep a core busy
    # (docs/benchmarks.md, "Core pinning"); the inference node too (its
    # batches compute on its cores, while the next one gathers). The
    # learner gets the rest.
    actors = sum(groups[n] in ('actor', 'inference') for n in own)
    actor_extra = 1 if actors and spare >= actors else 0
    spare -= actor_extra * actors
    for n in own:
      take = 1
      if groups[n] in ('actor', 'inference'):
        take += actor_extra
      elif groups[n] == 'learner' and spare > 0:
        take, spare = take + spare, 0
      assigned[n], free = tuple(free[:take]), free[take:]
    if shared:
      replay = [assigned[n] for n in own if groups[n] == 'replay']
      core = free[:1] or (replay[0][:1] if replay else assigned[own[0]][:1])
      for n in shared:
        assigned[n] = tuple(core)
    note = (f'cores: pinned ({len(host)} the launcher may use: '
            f'{format_cores(host)})')
  elif auto:
    each = ('the learner, the replay, the inference node and every actor'
            if 'inference' in groups else
            'the learner, the replay and every actor')
    note = (f'cores: not pinned: the automatic plan needs {len(own)} '
            f'cores (one each for {each}), '
            f'{len(free)} left of the launcher\'s {format_cores(host)}; every '
            'process may run on any of them')
  if not note:
    note = f'cores: as configured (the launcher may use {format_cores(host)})'
  return [cores or () for cores in assigned], note
