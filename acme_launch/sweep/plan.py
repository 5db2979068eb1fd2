"""Checking a sweep before anything starts: its points, its slots, its record.

A sweep is one program per point of a grid of config values, or of points
drawn at random from ranges (random search, sample.py):

    python launch.py --config=ppo_mujoco --sweep=seed=0,1,2,3
    python launch.py --config=smoke --sweep='ppo.learning_rate=3e-4,1e-3;seed=0,1'
    python launch.py --config=smoke --sweep_samples=8 \
        --sweep='ppo.learning_rate=loguniform(1e-5,1e-3);ppo.num_epochs=int(1,4)'

Deciding apart from doing: `prepare` checks everything and writes nothing,
so `--dry_run` prints exactly what `runner.run` would start. Random search
draws its points once, for a new sweep; sweep.json keeps them, so a resumed
sweep runs the same points.
The host is cut into slots: this launcher's cores (os.sched_getaffinity)
split as evenly as possible and, when the programs' plans use GPUs, its GPUs
too (slots.py). Before starting any, the sweep checks each point's plan as a
child in the smallest slot will see the host, handing that slot's view to
the planner as a value (plan/host.HostSlice).

With --launch_type=ray among the flags, the slots are shares of the cluster,
not of this host: the sweep joins the cluster once (cli.py), checks each
point's plan on it, and makes as many slots as the hosts hold points at once
(ray/cluster.copies_that_fit, slots.cluster_concurrency).

Flags are read by cli.py; this module gets plain values (SweepOptions) and
a `validate` callback (prepare.py's checks of a launch.py command line).
"""

import os
from typing import Any, Callable, Dict, List, Tuple

from acme_launch import errors
from acme_launch.sweep import population
from acme_launch.sweep import sample
from acme_launch.sweep import schedulers
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.points import (
    Checked, Point, check_fields, grid, make_points, parse_specs)
from acme_launch.sweep.record import (
    is_sweep_dir, new_record, point_args, point_state, points_of, read_record)
from acme_launch.sweep.slots import (
    Slot, host_cores_now, host_gpus_now, slot_view, choose_concurrency,
    cluster_concurrency, cluster_slots, describe_slot, make_slots)


def prepare(options: SweepOptions,
            validate: Callable[..., Checked], config=None, cluster=None
            ) -> Tuple[Dict[str, Any], List[Tuple[Point, str]], List[Slot]]:
  """(the sweep record, the (point, state) pairs to run, the slots).

  Checks everything and writes nothing; LaunchError for bad input.
  `validate(flags)` checks a child's launch.py flags as the CLI would (see
  make_points); each point is checked on the whole host and again as a
  child in the smallest slot sees the host. `config` is the base config of
  a new sweep, for the field names. `cluster` is (address, hosts) of the
  Ray cluster the points run on (--launch_type=ray), else None: the slots
  are then shares of the cluster, as many as it holds points at once.
  """
  if options.resume:
    record = read_record(options.sweep_dir)
    todo = [(p, point_state(options.sweep_dir, p)) for p in points_of(record)]
    todo = [(p, state) for p, state in todo if state != 'done']
  else:
    if os.path.exists(options.sweep_dir) and (
        not os.path.isdir(options.sweep_dir) or os.listdir(options.sweep_dir)):
      resume = (f'; resume it with --resume={options.sweep_dir}'
                if is_sweep_dir(options.sweep_dir) else '')
      raise errors.LaunchError(f'sweep directory {options.sweep_dir} exists'
                               f'{resume}; choose another --run_name')
    fields = parse_specs(options.specs)
    names = [f for f, _ in fields]
    ranges = sample.parse_ranges(fields)
    if ranges and not options.samples:
      field, spec = next(iter(ranges.items()))
      raise errors.LaunchError(
          f'--sweep: {field}={spec.text} is a range: random search needs '
          '--sweep_samples=N (a grid takes lists: FIELD=V1,V2,...)')
    check_fields(config, names, options.base_argv)
    if options.samples:
      sample.check_types(config, ranges)
      combos = sample.draw(fields, ranges, options.samples,
                           options.sample_seed)
    else:
      combos = grid(fields)
    if options.scheduler == 'pbt':
      population.check_space(fields, len(combos))
    points = make_points(names, combos, options.base_argv, validate)
    record = new_record(options, points, names)
    if options.scheduler == 'pbt':
      record['scheduler'] = population.settings(
          fields, ranges, min(p.max_actor_steps for p in points),
          int(config.get('eval_every_steps') or 0) if config else 0,
          options.pbt_interval_steps, options.pbt_quantile)
      record['scheduler']['freeze'] = options.pbt_freeze
    elif options.scheduler == 'asha':
      record['scheduler'] = schedulers.asha_settings(
          min(p.max_actor_steps for p in points),
          int(config.get('eval_every_steps') or 0) if config else 0,
          options.asha_grace_steps, options.asha_reduction)
    todo = [(p, 'new') for p in points]
  pbt = population.is_population(record)
  if cluster is not None:
    slots = _cluster_slots(options, validate, record, todo, cluster)
    if pbt:
      record['members_at_once'] = len(slots) >= len(todo)
    return record, todo, slots
  if not todo:
    choose_concurrency(options.max_concurrent, 1, host_cores_now(), (), False)
    return record, todo, []
  uses_gpus = any(p.uses_gpus for p, _ in todo)
  gpus = host_gpus_now(options.gpu_inventory) if uses_gpus else ()
  cores = host_cores_now()
  shared = pbt and not uses_gpus and options.max_concurrent >= len(todo)
  if shared:
    # Asked for every member at once: on fewer cores than members they
    # share the slots' cores (each on slot i mod slots), rather than take
    # turns.
    count = min(len(cores), len(todo))
  else:
    count = choose_concurrency(options.max_concurrent, len(todo), cores, gpus,
                               uses_gpus)
  if pbt:
    record['members_at_once'] = shared or count >= len(todo)
    # Frozen between turns unless asked not to, or GPUs would stay held by
    # a frozen program while another member's takes its slot.
    record['members_frozen'] = record['scheduler'].get('freeze', True) and (
        not uses_gpus or count >= len(todo))
  slots = make_slots(count, cores, gpus, uses_gpus)
  smallest = min(slots, key=lambda s: (len(s.cores), len(s.gpus)))
  seen_from = slot_view(smallest, record.get('cwd'))
  for point, state in todo:
    try:
      validate(point_args(options.sweep_dir, record, point, state), seen_from)
    except errors.LaunchError as e:
      where = f'on a slot of {describe_slot(smallest)}: ' if len(slots) > 1 else ''
      raise errors.LaunchError(
          f'sweep point {point.name}: {where}{e}') from None
  return record, todo, slots


def _cluster_slots(options: SweepOptions, validate: Callable[..., Checked],
                   record: Dict[str, Any], todo: List[Tuple[Point, str]],
                   cluster) -> List[Slot]:
  """Points on a Ray cluster: each checked as its child launcher will be
  (the cluster must hold its plan), then as many slots as the cluster
  holds points at once; record['ray_cluster'] says why."""
  from acme_launch.run.ray import cluster as ray_cluster
  address, hosts = cluster
  seen_from = slot_view(cluster_slots(1, address)[0], record.get('cwd'))
  plans = []
  for point, state in todo:
    try:
      checked = validate(point_args(options.sweep_dir, record, point, state),
                         seen_from)
    except errors.LaunchError as e:
      raise errors.LaunchError(f'sweep point {point.name}: {e}') from None
    plans.append(tuple(checked.demands))
  if not plans:
    return []
  count, capacity = cluster_concurrency(options.max_concurrent, plans, hosts,
                                        address)
  asks = sorted({ray_cluster.describe_amounts(ray_cluster.total(p))
                 for p in plans})
  has = {k: sum(h.resources.get(k, 0.0) for h in hosts)
         for k in ('CPU', 'GPU', 'memory')}
  has = {k: v for k, v in has.items() if v > 0}
  record['ray_cluster'] = {
      'address': address, 'hosts': [h.ip for h in hosts],
      'point_asks': asks, 'cluster_has': ray_cluster.describe_amounts(has),
      'holds': capacity, 'at_once': count}
  return cluster_slots(count, address)


def drawn(record: Dict[str, Any]) -> str:
  """' drawn with --sweep_seed=S' for random search's points, else ''."""
  drawn = record.get('random_search')
  return f' drawn with --sweep_seed={drawn["seed"]}' if drawn else ''


def describe_retries(record: Dict[str, Any]) -> str:
  """', a failed program started again up to N times' or ''."""
  retries = record.get('trial_retries')
  return (f', a failed program started again up to {retries} '
          f'time{"s" if retries > 1 else ""}' if retries else '')


def describe_scheduler(record: Dict[str, Any]) -> str:
  """', ASHA early stopping at rungs of N, M actor steps', a population's
  boundaries, or ''."""
  settings = record.get('scheduler')
  if not settings:
    return ''
  if population.is_population(record):
    return population.describe(settings, population.how_members_run(record))
  rungs = ', '.join(f'{r:,}' for r in settings['rungs'])
  return (f', ASHA early stopping (rungs at {rungs} actor steps, keeping '
          f'the best 1/{settings["reduction"]})')


def describe_cluster(cluster: Dict[str, Any], to_run: int,
                     requested: int) -> str:
  """Why so many points run at once on the Ray cluster (--dry_run)."""
  holds = cluster['holds']
  holds_text = (f'holds {holds} of these points at once' if holds < max(
      to_run, requested) else f'holds all {holds} of them at once')
  limit = (f'; --max_concurrent={requested}' if requested and
           requested < min(holds, to_run) else '')
  return (f'Ray cluster at {cluster["address"]}: {len(cluster["hosts"])} '
          f'hosts ({", ".join(cluster["hosts"])}) with '
          f'{cluster["cluster_has"]} in all; a point\'s nodes ask '
          f'{" or ".join(cluster["point_asks"])}; first fit of their nodes '
          f'on the hosts: the cluster {holds_text}{limit}: '
          f'{cluster["at_once"]} at once, the rest wait for room.')


def describe_at_once(record: Dict[str, Any], todo: List[Tuple[Point, str]],
                     slots: List[Slot]) -> str:
  """'N at once', and for a population's members sharing slots, on how
  many."""
  if record.get('members_at_once') and len(slots) < len(todo):
    return (f'{len(todo)} at once (every member; {len(slots)} '
            f'slot{"s" if len(slots) > 1 else ""} of cores shared)')
  return f'{len(slots)} at once'


def describe_dry_run(options: SweepOptions, record: Dict[str, Any],
                     todo: List[Tuple[Point, str]], slots: List[Slot]) -> str:
  lines = [f'sweep of {len(record["points"])} points of '
           f'{record["config_name"]}{drawn(record)}: {len(todo)} to run, '
           f'{describe_at_once(record, todo, slots)}'
           f'{describe_scheduler(record)}{describe_retries(record)}; sweep '
           f'directory {options.sweep_dir}', '']
  if record.get('ray_cluster') and slots:
    lines.append(describe_cluster(record['ray_cluster'], len(todo),
                                  options.max_concurrent))
  else:
    lines.append('slots:')
    lines += [f'  slot {s.index}: {describe_slot(s)}' for s in slots]
  lines += ['', 'points:']
  for point, state in todo:
    lines.append(f'  {point.name:<30} {" ".join(point.args)}'
                 f'{"  (resumed)" if state == "started" else ""}')
  lines.append('\ndry run: nothing was started.')
  return '\n'.join(lines)
