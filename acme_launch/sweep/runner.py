"""Sweeps: one program per point of a grid of config values, packed on this host.

    python launch.py --config=ppo_mujoco --sweep=seed=0,1,2,3
    python launch.py --config=smoke --sweep='ppo.learning_rate=3e-4,1e-3;seed=0,1'

Each point is a child `launch.py` process with the user's flags, less the
sweep's own, plus `--config.FIELD=VALUE` per swept field, its run directory
`SWEEP_DIR/POINT_NAME` and its output in `SWEEP_DIR/logs/POINT_NAME.log`.
The host is cut into slots: this launcher's cores (os.sched_getaffinity)
split as evenly as possible and, when the programs' plans use GPUs, its GPUs
too. A child gets its slot's cores by sched_setaffinity before exec and its
GPUs by CUDA_VISIBLE_DEVICES; its own planner then plans within them
(plan/host.py reads them). Before starting any, the sweep checks each
point's plan as a child in the smallest slot will see the host, handing
that slot's view to the planner as a value (plan/host.HostSlice). When a program ends, the next queued point takes its
slot.

    SWEEP_DIR/
      sweep.json          the points (fields, flags), the base argv, the slots,
                          and each launch of each point (cores, GPUs, pid, exit)
      sweep_summary.json  the table: per point, then per setting over seeds
      logs/POINT.log      each point's launcher output
      POINT/              each point's run directory (config.json, summary.json...)
      plots/              python -m acme_launch.plot SWEEP_DIR

Flags are read by cli.py; this module gets plain values (SweepOptions) and
a `validate` callback (cli's own checks of a launch.py command line), and
never reads a flag.
"""

import collections
import ctypes
import dataclasses
import datetime
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import acme_launch
from acme_launch import errors
from acme_launch import layout
from acme_launch.plan import host as host_lib
from acme_launch.plan import resources
from acme_launch.run import rundir

# A point's launcher: `python -m acme_launch`, which works from a checkout
# (ROOT on its PYTHONPATH) and installed alike.
LAUNCHER = ('-m', 'acme_launch')
SEED_FIELD = 'seed'
STOP_GRACE_SECONDS = 60.0   # A child launcher stops its nodes within 30 s.
_PR_SET_PDEATHSIG = 1

EXIT_OK = 0
EXIT_FAILED = 1


@dataclasses.dataclass(frozen=True)
class SweepOptions:
  """What the sweep launcher was asked, as plain values (made in cli.py)."""
  sweep_dir: str                  # Absolute.
  resume: bool                    # sweep_dir holds a sweep.json to finish.
  specs: Tuple[str, ...] = ()     # --sweep values as given (new sweep only).
  base_argv: Tuple[str, ...] = ()  # launch.py flags for every point.
  config_name: str = ''
  max_concurrent: int = 0         # 0: as many as the host can place.
  gpu_inventory: str = ''         # --gpu_inventory: a JSON file, or ask the driver.
  progress_every: float = 10.0
  dry_run: bool = False
  cwd: str = ''                   # Where the children run (relative paths).


@dataclasses.dataclass(frozen=True)
class Point:
  name: str                       # seed=0, ppo.learning_rate=0.001,seed=1
  fields: Tuple[Tuple[str, Any], ...]   # (field, value as the config holds it)
  args: Tuple[str, ...]           # --config.FIELD=VALUE as given
  max_actor_steps: int
  uses_gpus: bool = False

  @property
  def setting(self) -> str:
    """The point's name less its seed: points of one setting differ only
    in seed."""
    return _join([(f, v) for f, v in self.fields if f != SEED_FIELD])


@dataclasses.dataclass(frozen=True)
class Slot:
  index: int
  cores: Tuple[int, ...]
  gpus: Tuple[int, ...]           # Empty: the programs use no GPU.


# Points -----------------------------------------------------------------


def _split_values(text: str) -> List[str]:
  """'1,2,(3,4)' -> ['1', '2', '(3,4)']: commas inside brackets or quotes
  belong to the value (tuple fields)."""
  values, depth, quote, current = [], 0, '', ''
  for char in text:
    if quote:
      quote = '' if char == quote else quote
    elif char in '\'"':
      quote = char
    elif char in '([{':
      depth += 1
    elif char in ')]}':
      depth -= 1
    elif char == ',' and depth == 0:
      values.append(current.strip())
      current = ''
      continue
    current += char
  values.append(current.strip())
  return values


def parse_specs(specs: Sequence[str]) -> List[Tuple[str, List[str]]]:
  """--sweep values -> [(field, [value strings])], in the order given.

  Each spec is `FIELD=V1,V2,...`; several fields in one spec are separated
  by ';'. LaunchError for a malformed spec, an empty value or a field twice.
  """
  fields: List[Tuple[str, List[str]]] = []
  for spec in specs:
    for part in spec.split(';'):
      part = part.strip()
      if not part:
        continue
      field, equals, values_text = part.partition('=')
      field = field.strip()
      if field.startswith('config.'):
        field = field[len('config.'):]
      if not equals or not re.fullmatch(r'[A-Za-z_][\w.]*', field):
        raise errors.LaunchError(
            f'--sweep={spec}: expected FIELD=VALUE1,VALUE2,... (fields '
            "separated by ';'), e.g. --sweep=seed=0,1,2")
      values = _split_values(values_text)
      if any(v == '' for v in values):
        raise errors.LaunchError(f'--sweep={spec}: an empty value for {field}')
      if len(set(values)) != len(values):
        raise errors.LaunchError(f'--sweep={spec}: a value of {field} twice')
      if field in [f for f, _ in fields]:
        raise errors.LaunchError(f'--sweep: field {field} is swept twice')
      fields.append((field, values))
  if not fields:
    raise errors.LaunchError('--sweep needs FIELD=VALUE1,VALUE2,..., e.g. '
                             '--sweep=seed=0,1,2')
  return fields


def check_fields(config, fields: Sequence[str],
                 base_argv: Sequence[str]) -> None:
  """Each swept field is a field of the config (not a section), and not also
  set by a --config.FIELD flag."""
  for field in fields:
    node, path = config, field.split('.')
    for i, key in enumerate(path):
      if not hasattr(node, 'keys') or key not in node.keys():
        where = '.'.join(path[:i]) or 'the config'
        known = ', '.join(sorted(node.keys())) if hasattr(node, 'keys') else ''
        raise errors.LaunchError(
            f'--sweep: {field} is not a field of this config ({where} has '
            f'{known or "no fields"})')
      node = node[key]
    if hasattr(node, 'keys'):
      raise errors.LaunchError(
          f'--sweep: {field} is a section of the config; sweep one of its '
          f'fields: {", ".join(sorted(node.keys()))}')
    for arg in base_argv:
      if arg.lstrip('-').split('=', 1)[0] == f'config.{field}':
        raise errors.LaunchError(
            f'--sweep: {field} is also set by {arg}; give its values in '
            '--sweep only')


def _format_value(value: Any) -> str:
  if isinstance(value, (tuple, list)):
    return '(' + ','.join(_format_value(v) for v in value) + ')'
  return str(value)


def _join(fields: Sequence[Tuple[str, Any]]) -> str:
  return ','.join(f'{f}={_format_value(v)}' for f, v in fields)


def safe_name(text: str) -> str:
  """A file name for a point: letters, digits and ._,=+- kept, others '_'."""
  name = re.sub(r'[^A-Za-z0-9._,=+-]', '_', text) or '_'
  return name if name not in ('.', '..') else '_' + name


def field_value(config, field: str) -> Any:
  value = config
  for key in field.split('.'):
    value = value[key]
  return value


def make_points(fields: List[Tuple[str, List[str]]], base_argv: Sequence[str],
                validate: Callable[..., Tuple[Any, bool]]
                ) -> List[Point]:
  """The grid's points, each checked by `validate(launch.py flags)` (which
  returns the point's resolved config and whether its plan uses GPUs, or
  raises LaunchError). Point names use the config's own typed values, so
  `1e-3` names `0.001`; two values that read the same are refused."""
  names = [f for f, _ in fields]
  points = []
  for values in itertools.product(*[v for _, v in fields]):
    args = tuple(f'--config.{f}={v}' for f, v in zip(names, values))
    label = ','.join(f'{f}={v}' for f, v in zip(names, values))
    try:
      config, uses_gpus = validate([*base_argv, *args])
    except errors.LaunchError as e:
      raise errors.LaunchError(f'sweep point {label}: {e}') from None
    typed = tuple((f, field_value(config, f)) for f in names)
    points.append(Point(safe_name(_join(typed)), typed, args,
                        int(config.max_actor_steps), uses_gpus))
  seen = collections.Counter(p.name for p in points)
  twice = [name for name, count in seen.items() if count > 1]
  if twice:
    raise errors.LaunchError(
        f'--sweep: two values give the same point {twice[0]} (values that '
        'the config reads the same)')
  return points


# Slots ------------------------------------------------------------------


def host_capacity(cores: Sequence[int], gpus: Sequence[int],
                  uses_gpus: bool) -> int:
  """Programs this host can run at once: a core each, a GPU each if used."""
  return max(1, min(len(cores), len(gpus)) if uses_gpus and gpus
             else len(cores))


def choose_concurrency(requested: int, points: int, cores: Sequence[int],
                       gpus: Sequence[int], uses_gpus: bool) -> int:
  """--max_concurrent, checked against the host; 0 means the most it holds."""
  capacity = host_capacity(cores, gpus, uses_gpus)
  if requested > len(cores):
    raise errors.LaunchError(
        f'--max_concurrent={requested}: this launcher may use '
        f'{len(cores)} cores, and each program needs at least one')
  if requested > capacity:
    raise errors.LaunchError(
        f'--max_concurrent={requested}: this host has {len(gpus)} GPUs and '
        'each program\'s plan uses at least one')
  return max(1, min(requested or capacity, points))


def make_slots(count: int, cores: Sequence[int], gpus: Sequence[int],
               uses_gpus: bool) -> List[Slot]:
  """`count` disjoint slices of the cores (and GPUs, if used), sizes as
  even as possible."""
  cores, gpus = sorted(cores), sorted(gpus) if uses_gpus else []

  def piece(items, i):
    return tuple(items[i * len(items) // count:(i + 1) * len(items) // count])
  return [Slot(i, piece(cores, i), piece(gpus, i) if gpus else ())
          for i in range(count)]


def describe_slot(slot: Slot) -> str:
  gpus = ','.join(map(str, slot.gpus)) if slot.gpus else 'none'
  return f'cores {resources.format_cores(slot.cores)}, GPUs {gpus}'


# The sweep record ---------------------------------------------------------


def record_path(sweep_dir: str) -> str:
  return os.path.join(sweep_dir, 'sweep.json')


def summary_path(sweep_dir: str) -> str:
  return os.path.join(sweep_dir, 'sweep_summary.json')


def log_path(sweep_dir: str, point_name: str) -> str:
  return os.path.join(sweep_dir, 'logs', point_name + '.log')


def is_sweep_dir(path: str) -> bool:
  return os.path.isfile(record_path(path))


def read_record(sweep_dir: str) -> Dict[str, Any]:
  record = layout.read_json(record_path(sweep_dir))
  if not isinstance(record, dict) or 'points' not in record:
    raise errors.LaunchError(f'{sweep_dir}: sweep.json is missing or damaged')
  return record


def new_record(options: SweepOptions, points: List[Point],
               fields: Sequence[str]) -> Dict[str, Any]:
  return {
      'config_name': options.config_name,
      'created': datetime.datetime.now().isoformat(timespec='seconds'),
      'cwd': options.cwd,
      'base_argv': list(options.base_argv),
      'fields': list(fields),
      'points': [{'name': p.name, 'fields': dict(p.fields),
                  'setting': p.setting, 'args': list(p.args),
                  'max_actor_steps': p.max_actor_steps,
                  'uses_gpus': p.uses_gpus, 'launches': []} for p in points],
  }


def points_of(record: Dict[str, Any]) -> List[Point]:
  return [Point(p['name'], tuple(p['fields'].items()), tuple(p['args']),
                int(p['max_actor_steps']), bool(p.get('uses_gpus')))
          for p in record['points']]


def point_state(sweep_dir: str, point: Point) -> str:
  """'done' (its summary.json says it reached its budget), 'started' (its
  run directory has a config.json) or 'new'."""
  run_dir = os.path.join(sweep_dir, point.name)
  summary = layout.read_json(layout.summary_path(run_dir), {})
  if summary.get('exit_reason') == 'budget_reached':
    return 'done'
  return 'started' if os.path.isfile(layout.config_path(run_dir)) else 'new'


def point_args(sweep_dir: str, record: Dict[str, Any], point: Point,
               state: str) -> List[str]:
  """The child's launch.py flags: base, the point's fields, its run dir."""
  run_dir = os.path.join(sweep_dir, point.name)
  where = ([f'--resume={run_dir}'] if state == 'started' else
           [f'--workdir={sweep_dir}', f'--run_name={point.name}'])
  return [*record['base_argv'], *point.args, *where]


# Running ------------------------------------------------------------------


def _preexec(cores: Tuple[int, ...]) -> Callable[[], None]:
  """Runs in the child before exec: its cores; SIGKILL if we die."""
  def setup() -> None:
    os.sched_setaffinity(0, cores)
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(_PR_SET_PDEATHSIG,
                                                     signal.SIGKILL)
  return setup


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
    from acme_launch.run import progress as progress_lib  # pylint: disable=g-import-not-at-top
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
        p for p in (acme_launch.ROOT, env.get('PYTHONPATH', '')) if p)
    if slot.gpus:
      env['CUDA_VISIBLE_DEVICES'] = ','.join(map(str, slot.gpus))
      env['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'  # nvidia-smi's numbering.
    path = log_path(self._dir, point.name)
    log = open(path, 'a')  # pylint: disable=consider-using-with
    log.write(f'acme-launch sweep: {" ".join(argv)} ({describe_slot(slot)})\n')
    log.flush()
    popen = subprocess.Popen(
        argv, cwd=self._record.get('cwd') or None, env=env,
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        # Our signals reach it once, forwarded; a terminal's Ctrl-C not twice.
        start_new_session=True, preexec_fn=_preexec(slot.cores))
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
    from acme_launch.run import summary as summary_lib  # pylint: disable=g-import-not-at-top
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


# The table ----------------------------------------------------------------


def final_return(summary: Dict[str, Any]) -> Optional[float]:
  """The final evaluation's mean, else the last evaluation's return."""
  value = summary.get('final_eval_return_mean')
  return summary.get('last_eval_return') if value is None else value


def summarize(sweep_dir: str, record: Dict[str, Any]) -> Dict[str, Any]:
  """sweep_summary.json: a row per point, then per setting over seeds."""
  rows = []
  for entry in record['points']:
    run_dir = os.path.join(sweep_dir, entry['name'])
    summary = layout.read_json(layout.summary_path(run_dir), {})
    launches = entry.get('launches', [])
    launcher_seconds = sum((l['ended'] or l['started']) - l['started']
                           for l in launches)
    rows.append({
        'point': entry['name'], 'setting': entry['setting'],
        'fields': entry['fields'], 'run_dir': run_dir,
        'exit_reason': summary.get('exit_reason') or (
            launches[-1]['exit_reason'] if launches else 'not started'),
        'budget_reached': summary.get('exit_reason') == 'budget_reached',
        'actor_steps': summary.get('actor_steps'),
        'final_return': final_return(summary),
        'wall_time_seconds': summary.get('wall_time_seconds'),
        'launcher_seconds': round(launcher_seconds, 1),
        'launches': len(launches),
    })
  settings = []
  for setting in dict.fromkeys(r['setting'] for r in rows):
    group = [r for r in rows if r['setting'] == setting]
    finals = [r['final_return'] for r in group if r['final_return'] is not None]
    settings.append({
        'setting': setting or record.get('config_name', ''),
        'seeds': [r['fields'].get(SEED_FIELD) for r in group],
        'returns': finals,
        'final_return_mean': statistics.fmean(finals) if finals else None,
        # Over seeds, as bench/learning.py: the population deviation.
        'final_return_std': statistics.pstdev(finals) if finals else None,
    })
  return {'points': rows, 'settings': settings,
          'failed': [r['point'] for r in rows if not r['budget_reached']]}


def _number(value: Optional[float], spec: str = '.1f') -> str:
  return '-' if value is None else format(value, spec)


def format_table(table: Dict[str, Any]) -> str:
  width = max([len(r['point']) for r in table['points']] +
              [len(s['setting']) for s in table['settings']] + [7])
  lines = [f'{"point":<{width}}  {"exit reason":<16} {"final return":>12} '
           f'{"wall time":>10}']
  for r in table['points']:
    wall = r['wall_time_seconds']
    lines.append(f'{r["point"]:<{width}}  {r["exit_reason"]:<16} '
                 f'{_number(r["final_return"]):>12} '
                 f'{"-" if wall is None else f"{wall:.1f} s":>10}')
  lines.append('')
  lines.append(f'{"setting":<{width}}  {"seeds":<16} final return mean +- std')
  for s in table['settings']:
    seeds = ','.join(str(x) for x in s['seeds'] if x is not None) or '-'
    if s['final_return_mean'] is None:
      figure = '-'
    else:
      figure = (f'{s["final_return_mean"]:.1f} +- {s["final_return_std"]:.1f}'
                f' ({len(s["returns"])} of {len(s["seeds"])} points)')
    lines.append(f'{s["setting"]:<{width}}  {seeds:<16} {figure}')
  return '\n'.join(lines)


# The whole sweep ------------------------------------------------------------


def prepare(options: SweepOptions,
            validate: Callable[..., Tuple[Any, bool]], config=None
            ) -> Tuple[Dict[str, Any], List[Tuple[Point, str]], List[Slot]]:
  """(the sweep record, the (point, state) pairs to run, the slots).

  Checks everything and writes nothing; LaunchError for bad input.
  `validate(flags)` checks a child's launch.py flags as the CLI would (see
  make_points); each point is checked on the whole host and again as a
  child in the smallest slot sees the host. `config` is the base config of
  a new sweep, for the field names.
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
    check_fields(config, [f for f, _ in fields], options.base_argv)
    points = make_points(fields, options.base_argv, validate)
    record = new_record(options, points, [f for f, _ in fields])
    todo = [(p, 'new') for p in points]
  if not todo:
    choose_concurrency(options.max_concurrent, 1, _host_cores(), (), False)
    return record, todo, []
  uses_gpus = any(p.uses_gpus for p, _ in todo)
  gpus = _host_gpus(options.gpu_inventory) if uses_gpus else ()
  cores = _host_cores()
  count = choose_concurrency(options.max_concurrent, len(todo), cores, gpus,
                             uses_gpus)
  slots = make_slots(count, cores, gpus, uses_gpus)
  smallest = min(slots, key=lambda s: (len(s.cores), len(s.gpus)))
  seen_from = _seen_from(smallest, record.get('cwd'))
  for point, state in todo:
    try:
      validate(point_args(options.sweep_dir, record, point, state), seen_from)
    except errors.LaunchError as e:
      where = f'on a slot of {describe_slot(smallest)}: ' if len(slots) > 1 else ''
      raise errors.LaunchError(
          f'sweep point {point.name}: {where}{e}') from None
  return record, todo, slots


def _host_cores() -> List[int]:
  return list(host_lib.HostSlice.of_this_process().cores)


def _host_gpus(inventory_path: str) -> Tuple[int, ...]:
  from acme_launch.plan import gpu_inventory  # pylint: disable=g-import-not-at-top
  visible = host_lib.HostSlice.of_this_process().visible_gpus
  return tuple(g.index for g in gpu_inventory.read_inventory(inventory_path,
                                                             visible))


def _seen_from(slot: Slot, cwd: Optional[str]) -> host_lib.HostSlice:
  """The host as a child in `slot` will see it: the slot's cores, its GPUs
  (or the launcher's own visible ones), and the sweep's working directory."""
  own = host_lib.HostSlice.of_this_process()
  visible = (','.join(map(str, slot.gpus)) if slot.gpus
             else own.visible_gpus)
  return host_lib.HostSlice(tuple(slot.cores), visible,
                            cwd if cwd and os.path.isdir(cwd) else own.cwd)


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
        f'({", ".join(record["fields"])}): {len(todo)} to run, '
        f'{len(slots)} at once; sweep directory {options.sweep_dir}',
        flush=True)
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


def describe_dry_run(options: SweepOptions, record: Dict[str, Any],
                     todo: List[Tuple[Point, str]], slots: List[Slot]) -> str:
  lines = [f'sweep of {len(record["points"])} points of '
           f'{record["config_name"]}: {len(todo)} to run, {len(slots)} at '
           f'once; sweep directory {options.sweep_dir}', '', 'slots:']
  lines += [f'  slot {s.index}: {describe_slot(s)}' for s in slots]
  lines += ['', 'points:']
  for point, state in todo:
    lines.append(f'  {point.name:<30} {" ".join(point.args)}'
                 f'{"  (resumed)" if state == "started" else ""}')
  lines.append('\ndry run: nothing was started.')
  return '\n'.join(lines)
