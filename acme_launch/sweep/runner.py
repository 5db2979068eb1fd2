"""Running a checked sweep: its programs in slots until each ended.

plan.py decides what runs where (the record, the points to run, the slots);
this module only starts, watches and stops. Each point is a child
`launch.py` process with the user's flags, less the sweep's own, plus
`--config.FIELD=VALUE` per swept field, its run directory
`SWEEP_DIR/POINT_NAME` and its output in `SWEEP_DIR/logs/POINT_NAME.log`.
A child gets its slot's cores by sched_setaffinity before exec and its GPUs
by CUDA_VISIBLE_DEVICES; its own planner then plans within them (plan/host.py
reads them). When a program ends, the next queued point takes its slot.
With --launch_type=ray among the flags, each point's child launcher is a
Ray run: it runs here, its nodes on the cluster, its run directory still
SWEEP_DIR/POINT (run/ray/files.py).

    SWEEP_DIR/
      sweep.json          the points (fields, flags), the base argv, the slots,
                          and each launch of each point (cores, GPUs, pid, exit)
      sweep_summary.json  the table: per point, then per setting over seeds
      logs/POINT.log      each point's launcher output
      POINT/              each point's run directory (config.json, summary.json...)
      plots/              python -m acme_launch.plot SWEEP_DIR
"""


import collections
import dataclasses
import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from acme_launch import credentials
from acme_launch import paths
from acme_launch import layout
from acme_launch import safe_dirs
from acme_launch.run import rundir
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.plan import drawn
from acme_launch.sweep.points import Point
from acme_launch.sweep.record import (
    final_return, format_table, log_path, point_args, record_path, summarize,
    summary_path)
from acme_launch.sweep.slots import Slot, pinned_preexec, describe_slot

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
    log = os.fdopen(safe_dirs.open_append_nofollow(path), 'a')
    log.write(f'acme-launch sweep: {" ".join(credentials.mask_all(argv))} '
              f'({describe_slot(slot)})\n')
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
      log = log_path(self._dir, child.point.name)
      print(f'acme-launch: sweep: {child.point.name} ended without reaching '
            f'its budget: {reason}{f" ({failed})" if failed else ""}, exit '
            f'{code}, after {seconds:.0f} s; log {log}', flush=True)
      # Its launcher's output, the failed node's own last lines among them.
      tail = layout.log_tail(log, lines=30)
      if tail:
        print('acme-launch: sweep: the end of that log:\n' + ''.join(
            f'  | {line}\n' for line in tail.splitlines()), flush=True)

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


def run(options: SweepOptions, record: Dict[str, Any],
        todo: List[Tuple[Point, str]], slots: List[Slot]) -> int:
  """Runs the sweep to its end; prints and writes the table; exit code."""
  # Made (exclusively under a name chosen at random) or opened, checked on
  # its descriptor (safe_dirs.py), locked.
  rundir.take(options.sweep_dir, new=options.new_dir, what='sweep directory',
              folders=('logs',))
  record['slots'] = [dataclasses.asdict(s) for s in slots]
  layout.write_json_atomic(record_path(options.sweep_dir), record)
  total = len(record['points'])
  print(f'acme-launch: sweep of {total} points of {record["config_name"]} '
        f'({", ".join(record["fields"])}){drawn(record)}: {len(todo)} to run, '
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
