"""Sweeps: one program per point of a grid of config values, or of points
drawn at random from ranges (random search), packed on this host.

    python launch.py --config=ppo_mujoco --sweep=seed=0,1,2,3
    python launch.py --config=smoke --sweep='ppo.learning_rate=3e-4,1e-3;seed=0,1'
    python launch.py --config=smoke --sweep_samples=8 \
        --sweep='ppo.learning_rate=loguniform(1e-5,1e-3);ppo.num_epochs=int(1,4)'

Each point is a child `launch.py` process with the user's flags, less the
sweep's own, plus `--config.FIELD=VALUE` per swept field, its run directory
`SWEEP_DIR/POINT_NAME` and its output in `SWEEP_DIR/logs/POINT_NAME.log`.
Random search (sample.py) draws its points once, for a new sweep; sweep.json
keeps them, so a resumed sweep runs the same points.
The host is cut into slots: this launcher's cores (os.sched_getaffinity)
split as evenly as possible and, when the programs' plans use GPUs, its GPUs
too. A child gets its slot's cores by sched_setaffinity before exec and its
GPUs by CUDA_VISIBLE_DEVICES; its own planner then plans within them
(plan/host.py reads them). Before starting any, the sweep checks each
point's plan as a child in the smallest slot will see the host, handing
that slot's view to the planner as a value (plan/host.HostSlice). When a
program ends, the next queued point takes its slot.

With --launch_type=ray among the flags, each point's child launcher is a
Ray run: it runs here, its nodes on the cluster, its run directory still
SWEEP_DIR/POINT (run/ray/files.py). The slots are then shares of the
cluster, not of this host: the sweep joins the cluster once (cli.py),
checks each point's plan on it, and makes as many slots as the hosts hold
points at once (ray/cluster.copies_that_fit, slots.cluster_concurrency).

    SWEEP_DIR/
      sweep.json          the points (fields, flags), the base argv, the slots,
                          and each launch of each point (cores, GPUs, pid, exit)
      sweep_summary.json  the table: per point, then per setting over seeds
      logs/POINT.log      each point's launcher output
      POINT/              each point's run directory (config.json, summary.json...)
      plots/              python -m acme_launch.plot SWEEP_DIR

Flags are read by cli.py; this module gets plain values (SweepOptions) and
a `validate` callback (prepare.py's checks of a launch.py command line), and
never reads a flag.
"""


import collections
import dataclasses
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from acme_launch import paths
from acme_launch import errors
from acme_launch import layout
from acme_launch.run import rundir
from acme_launch.sweep import sample
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.points import (
    Checked, Point, check_fields, grid, make_points, parse_specs)
from acme_launch.sweep.record import (
    final_return, format_table, is_sweep_dir, log_path, new_record, point_args,
    point_state, points_of, read_record, record_path, summarize, summary_path)
from acme_launch.sweep.slots import (
    Slot, host_cores_now, host_gpus_now, pinned_preexec, slot_view, choose_concurrency,
    cluster_concurrency, cluster_slots, describe_slot, make_slots)

# A point's launcher: `python -m acme_launch`, which works from a checkout
# (ROOT on its PYTHONPATH) and installed alike.
LAUNCHER = ('-m', 'acme_launch')
STOP_GRACE_SECONDS = 60.0   # A child launcher stops its nodes within 30 s.

EXIT_OK = 0
EXIT_FAILED = 1


@dataclasses.dataclass
class _Child:
  point: Point
  slot: Slot
  popen: subprocess.Popen
  log: Any
  started: float
  launch: Dict[str, Any]          # Its entry in sweep.json's launches.
  rate: Any = None                # progress.RateEstimator
  signals_passed: int = 0         # Of the sweep's SIGINT/SIGTERMs.


class SweepRunner:
  """Runs points in slots until each ended; see the module docstring."""

  def __init__(self, sweep_dir: str, record: Dict[str, Any],
               progress_every: float = 10.0):
    self._dir = sweep_dir
    self._record = record
    self._progress_every = progress_every
    self._stop_signal: Optional[int] = None
    self._signals_seen = 0
    self._children: List[_Child] = []
    self._entries = {p['name']: p for p in record['points']}

  def _save(self) -> None:
    layout.write_json_atomic(record_path(self._dir), self._record)

  def _on_signal(self, signum, frame) -> None:
    del frame
    self._signals_seen += 1
    if self._stop_signal is None:
      self._stop_signal = signum
      print('acme-launch: sweep: stopping every program (checkpoints are '
            'being saved); Ctrl-C again to kill them.', flush=True)
    self._pass_signals()

  def _pass_signals(self) -> None:
    """Each signal the sweep got, passed once to each running launcher
    (which stops its own nodes); also to one started as it came."""
    for child in self._children:
      while child.signals_passed < self._signals_seen:
        child.signals_passed += 1
        if child.popen.poll() is None:
          try:
            child.popen.send_signal(self._stop_signal)
          except ProcessLookupError:
            pass

  def run(self, todo: List[Tuple[Point, str]], slots: List[Slot]) -> int:
    """Runs `todo` ((point, state) pairs); returns the signal that stopped
    the sweep, or 0."""
    from acme_launch.run import progress as progress_lib
    queue = collections.deque(todo)
    free = list(slots)
    previous = {s: signal.signal(s, self._on_signal)
                for s in (signal.SIGINT, signal.SIGTERM)}
    last_progress = time.time()
    stop_deadline = None
    try:
      while queue or self._children:
        while queue and free and self._stop_signal is None:
          point, state = queue.popleft()
          child = self._start(point, state, free.pop(0))
          child.rate = progress_lib.RateEstimator()
          self._children.append(child)
        for child in list(self._children):
          if child.popen.poll() is not None:
            self._finish(child)
            self._children.remove(child)
            free.append(child.slot)
            free.sort(key=lambda s: s.index)
        if self._stop_signal is not None:
          self._pass_signals()
          stop_deadline = stop_deadline or time.time() + STOP_GRACE_SECONDS
          if time.time() > stop_deadline:
            self._kill_all()
        if time.time() - last_progress >= self._progress_every:
          last_progress = time.time()
          for child in self._children:
            print(self._progress_line(child), flush=True)
        time.sleep(0.5)
    finally:
      self._kill_all()
      for s, handler in previous.items():
        signal.signal(s, handler)
    return self._stop_signal or 0

  def _start(self, point: Point, state: str, slot: Slot) -> _Child:
    argv = [sys.executable, *LAUNCHER,
            *point_args(self._dir, self._record, point, state)]
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (paths.ROOT, env.get('PYTHONPATH', '')) if p)
    if slot.gpus:
      env['CUDA_VISIBLE_DEVICES'] = ','.join(map(str, slot.gpus))
      env['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'  # nvidia-smi's numbering.
    path = log_path(self._dir, point.name)
    log = open(path, 'a')
    log.write(f'acme-launch sweep: {" ".join(argv)} ({describe_slot(slot)})\n')
    log.flush()
    popen = subprocess.Popen(
        argv, cwd=self._record.get('cwd') or None, env=env,
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        # Our signals reach it once, forwarded; a terminal's Ctrl-C not twice.
        start_new_session=True, preexec_fn=pinned_preexec(slot.cores))
    launch = {'slot': slot.index, 'cores': list(slot.cores),
              'gpus': list(slot.gpus), 'pid': popen.pid,
              'resumed': state == 'started', 'started': time.time(),
              'ended': None, 'exit_code': None, 'exit_reason': None}
    self._entries[point.name]['launches'].append(launch)
    self._save()
    print(f'acme-launch: sweep: {point.name} started on '
          f'{describe_slot(slot)}{" (resumed)" if state == "started" else ""}'
          f'; log {path}', flush=True)
    return _Child(point, slot, popen, log, time.time(), launch)

  def _finish(self, child: _Child) -> None:
    child.log.close()
    run_dir = os.path.join(self._dir, child.point.name)
    summary = layout.read_json(layout.summary_path(run_dir), {})
    try:
      if os.path.getmtime(layout.summary_path(run_dir)) < child.started:
        summary = {}  # A previous launch's: this one ended before its own.
    except OSError:
      pass
    code = child.popen.returncode
    reason = summary.get('exit_reason') or (
        f'killed by signal {-code}' if code < 0 else f'exit code {code}')
    child.launch.update(ended=time.time(), exit_code=code, exit_reason=reason)
    self._save()
    seconds = time.time() - child.started
    if reason == 'budget_reached' and code == 0:
      final = final_return(summary)
      print(f'acme-launch: sweep: {child.point.name} reached its budget in '
            f'{seconds:.0f} s (final return '
            f'{"-" if final is None else f"{final:.1f}"})', flush=True)
    else:
      failed = summary.get('failed_node')
      print(f'acme-launch: sweep: {child.point.name} ended without reaching '
            f'its budget: {reason}{f" ({failed})" if failed else ""}, exit '
            f'{code}, after {seconds:.0f} s; log '
            f'{log_path(self._dir, child.point.name)}', flush=True)

  def _progress_line(self, child: _Child) -> str:
    from acme_launch.run import summary as summary_lib
    run_dir = os.path.join(self._dir, child.point.name)
    progress = layout.read_json(layout.progress_path(run_dir))
    if progress is None:
      return f'progress: {child.point.name} | starting'
    steps = int(progress.get('counts', {}).get('actor_steps', 0))
    now = time.time()
    child.rate.add(float(progress.get('time', now)), steps)
    budget = child.point.max_actor_steps
    evaluations = summary_lib.evaluation_rows(run_dir)
    eval_return = (f'{evaluations[-1]["episode_return"]:.1f}'
                   if evaluations else '-')
    return (f'progress: {child.point.name} | actor steps {steps:,}/{budget:,} '
            f'({100.0 * steps / budget:.0f}%) | '
            f'{child.rate.rate(now):,.0f} env steps/s | eval return '
            f'{eval_return}')

  def _kill_all(self) -> None:
    """Kills what is still running (its nodes die with it: PDEATHSIG)."""
    for child in self._children:
      if child.popen.poll() is None:
        try:
          os.killpg(child.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
          pass
        child.popen.wait()


# The whole sweep ------------------------------------------------------------


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
    points = make_points(names, combos, options.base_argv, validate)
    record = new_record(options, points, names)
    todo = [(p, 'new') for p in points]
  if cluster is not None:
    return record, todo, _cluster_slots(options, validate, record, todo,
                                        cluster)
  if not todo:
    choose_concurrency(options.max_concurrent, 1, host_cores_now(), (), False)
    return record, todo, []
  uses_gpus = any(p.uses_gpus for p, _ in todo)
  gpus = host_gpus_now(options.gpu_inventory) if uses_gpus else ()
  cores = host_cores_now()
  count = choose_concurrency(options.max_concurrent, len(todo), cores, gpus,
                             uses_gpus)
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


def run(options: SweepOptions, record: Dict[str, Any],
        todo: List[Tuple[Point, str]], slots: List[Slot]) -> int:
  """Runs the sweep to its end; prints and writes the table; exit code."""
  os.makedirs(os.path.join(options.sweep_dir, 'logs'), mode=0o700,
              exist_ok=True)
  rundir.lock(options.sweep_dir)
  record['slots'] = [dataclasses.asdict(s) for s in slots]
  layout.write_json_atomic(record_path(options.sweep_dir), record)
  total = len(record['points'])
  print(f'acme-launch: sweep of {total} points of {record["config_name"]} '
        f'({", ".join(record["fields"])}){_drawn(record)}: {len(todo)} to run, '
        f'{len(slots)} at once{_where(record)}; sweep directory '
        f'{options.sweep_dir}', flush=True)
  stopped_by = SweepRunner(options.sweep_dir, record,
                           options.progress_every).run(todo, slots)
  table = summarize(options.sweep_dir, record)
  layout.write_json_atomic(summary_path(options.sweep_dir), table)
  print('\n' + format_table(table))
  print(f'sweep directory  {options.sweep_dir}')
  if stopped_by:
    print(f'acme-launch: sweep stopped; finish it with --resume='
          f'{options.sweep_dir}', file=sys.stderr)
    return 128 + stopped_by if stopped_by != signal.SIGINT else 130
  if table['failed']:
    print(f'acme-launch: sweep: {len(table["failed"])} of {total} points did '
          f'not reach their budget: {", ".join(table["failed"])}; finish them '
          f'with --resume={options.sweep_dir}', file=sys.stderr)
    return EXIT_FAILED
  return EXIT_OK


def _where(record: Dict[str, Any]) -> str:
  """' on the Ray cluster at ADDRESS' for points that run there, else ''."""
  cluster = record.get('ray_cluster')
  return f' on the Ray cluster at {cluster["address"]}' if cluster else ''


def _drawn(record: Dict[str, Any]) -> str:
  """' drawn with --sweep_seed=S' for random search's points, else ''."""
  drawn = record.get('random_search')
  return f' drawn with --sweep_seed={drawn["seed"]}' if drawn else ''


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


def describe_dry_run(options: SweepOptions, record: Dict[str, Any],
                     todo: List[Tuple[Point, str]], slots: List[Slot]) -> str:
  lines = [f'sweep of {len(record["points"])} points of '
           f'{record["config_name"]}{_drawn(record)}: {len(todo)} to run, '
           f'{len(slots)} at once; sweep directory {options.sweep_dir}', '']
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
