"""Running a checked sweep: its points as Ray Tune trials until each ended.

plan.py decides what runs where (the record, the points to run, the slots);
this module hands the points to Ray Tune, on the sweep's own local Ray
instance (local_ray.py), and keeps the sweep's record and terminal lines.
Tune queues the points, runs as many at once as there are slots, and ends
the sweep when each trial ended; a trial (trials.py) takes a free slot and
runs the point's child `launch.py` there, with the user's flags, less the
sweep's own, plus `--config.FIELD=VALUE` per swept field, its run directory
`SWEEP_DIR/POINT_NAME` and its output in `SWEEP_DIR/logs/POINT_NAME.log`.
A child gets its slot's cores by sched_setaffinity before exec and its GPUs
by CUDA_VISIBLE_DEVICES; its own planner then plans within them (plan/host.py
reads them). With --launch_type=ray among the flags, each point's child
launcher is a Ray run: it runs here, its nodes on the cluster, its run
directory still SWEEP_DIR/POINT (run/ray/files.py).

This process alone writes sweep.json: the trials report (Tune results), a
Tune callback here records and prints.

    SWEEP_DIR/
      sweep.json          the points (fields, flags), the base argv, the slots,
                          and each launch of each point (cores, GPUs, pid, exit)
      sweep_summary.json  the table: per point, then per setting over seeds
      logs/POINT.log      each point's launcher output
      POINT/              each point's run directory (config.json, summary.json...)
      plots/              python -m acme_launch.plot SWEEP_DIR
"""


import dataclasses
import os
import signal
import sys
import time
import warnings
from typing import Any, Dict, List, Tuple

from acme_launch import layout
from acme_launch.run import rundir
from acme_launch.sweep import local_ray
from acme_launch.sweep import population
from acme_launch.sweep import schedulers
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.plan import (
    describe_at_once, describe_retries, describe_scheduler, drawn)
from acme_launch.sweep.points import Point
from acme_launch.sweep.record import (
    close_open_launches, final_return, format_table, log_path, points_of,
    record_path, summarize, summary_path)
from acme_launch.sweep.slots import Slot

EXIT_OK = 0
EXIT_FAILED = 1


def _reporter_class():
  """The Tune callback class (ray.tune is imported only when a sweep runs)."""
  from ray import tune

  class Reporter(tune.Callback):
    """Records the trials' launches in sweep.json and prints their lines:
    started, progress every `progress_every` seconds, ended."""

    def __init__(self, sweep_dir: str, record: Dict[str, Any],
                 progress_every: float, stop: '_Stop'):
      self._dir = sweep_dir
      self._record = record
      self._progress_every = progress_every
      self._stop = stop
      self._entries = {p['name']: p for p in record['points']}
      self._points = {p.name: p for p in points_of(record)}
      self._running: Dict[str, Dict[str, Any]] = {}  # Name -> its launch.
      self._latest: Dict[str, Dict[str, Any]] = {}   # Name -> last result.
      self._rates: Dict[str, Any] = {}
      self._names: Dict[str, str] = {}               # Trial id -> point.
      self._told_after: List[str] = []
      self._last_progress = time.time()

    def _save(self) -> None:
      layout.write_json_atomic(record_path(self._dir), self._record)

    def _name(self, trial) -> str:
      """The point a trial runs. (A population's exploit gives a trial
      the config of the member it copies: its results say who it is.)"""
      return self._names.get(trial.trial_id) or trial.config['point']

    def on_trial_result(self, iteration, trials, trial, result, **info):
      del iteration, trials, info
      name = result.get('point') or trial.config['point']
      self._names[trial.trial_id] = name
      event = result.get('event')
      if event == 'started':
        self._started(name, result)
      elif event == 'progress':
        self._latest[name] = result
        self._rates[name].add(float(result.get('progress_time', time.time())),
                              int(result.get('actor_steps', 0)))
        if result.get('boundary'):  # A member running through reached one.
          self._boundary(name, result['segment_steps'],
                         result['segment_return'], result['values'])
        if result.get('frozen') or result.get('thawed'):
          self._frozen(name, result)
      elif event == 'segment':
        self._segment_ended(name, result)
      elif event == 'ended':
        self._ended(name, result)
      # The scheduler acts on a result before the callbacks see it: its
      # exploits are told after the result that made them.
      for line in self._told_after:
        print(line, flush=True)
      self._told_after.clear()

    def on_trial_error(self, iteration, trials, trial, **info):
      del iteration, trials, info
      name = self._name(trial)
      launch = self._running.pop(name, None)
      if launch is not None:
        launch.update(ended=time.time(), exit_code=None,
                      exit_reason='its trial failed')
        self._save()
      print(f'acme-launch: sweep: {name}: its trial failed: '
            f'{trial.error_file or "no error file"}', flush=True)

    def on_trial_recover(self, iteration, trials, trial, **info):
      """A program failed and its trial starts again (--trial_retries)."""
      del iteration, trials, info
      name = self._name(trial)
      launch = self._running.pop(name, None)
      if launch is None:
        return
      from acme_launch.sweep import trials as trials_lib
      reason, summary = trials_lib.end_reason(
          os.path.join(self._dir, name), launch['started'], 1)
      launch.update(ended=time.time(), exit_reason=reason, retried=True,
                    failed_node=summary.get('failed_node'))
      self._save()
      failed = summary.get('failed_node')
      print(f'acme-launch: sweep: {name} failed: {reason}'
            f'{f" ({failed})" if failed else ""}; starting it again from its '
            'checkpoints (--trial_retries)', flush=True)

    def on_trial_complete(self, iteration, trials, trial, **info):
      """A trial that ends without its point's end: the scheduler stopped
      it (schedulers.py); its trial stops the child launcher."""
      del iteration, trials, info
      name = self._name(trial)
      launch = self._running.pop(name, None)
      if launch is None:
        return
      stopped = schedulers.read_stopped_early(os.path.join(self._dir, name))
      launch.update(ended=time.time(), exit_reason=(
          schedulers.STOPPED_EARLY if stopped else 'stopped by Tune'))
      self._save()
      why = stopped['why'] if stopped else 'its trial was stopped'
      print(f'acme-launch: sweep: {name} stopped early: {why}; its program '
            'stops with its checkpoints saved', flush=True)

    def on_step_end(self, iteration, trials, **info):
      del iteration, trials, info
      self._stop.tick()
      if time.time() - self._last_progress >= self._progress_every:
        self._last_progress = time.time()
        for name in self._running:
          print(self._progress_line(name), flush=True)

    def _started(self, name: str, result: Dict[str, Any]) -> None:
      from acme_launch.run import progress as progress_lib
      launch = {'slot': result['slot'], 'cores': result['cores'],
                'gpus': result['gpus'], 'pid': result['launcher_pid'],
                'resumed': result['resumed'], 'started': result['started'],
                'ended': None, 'exit_code': None, 'exit_reason': None}
      entry = self._entries[name]
      if 'values' in result:  # A population's member.
        launch.update(from_steps=result['actor_steps'],
                      values=result['values'], copied=result['copied'])
        if 'segment_end' in result:  # One segment (taking turns).
          launch['segment_end'] = result['segment_end']
        else:  # Through to its budget (or until it copies a member).
          launch['until'] = self._points[name].max_actor_steps
        entry['values'] = result['values']
      entry['launches'].append(launch)
      self._running[name] = launch
      self._rates[name] = progress_lib.RateEstimator()
      self._save()
      segment = (f' for actor steps {result["actor_steps"]:,} to '
                 f'{result["segment_end"]:,}' if 'segment_end' in result
                 else f' from actor steps {result["actor_steps"]:,}'
                 if result.get('actor_steps') else '')
      print(f'acme-launch: sweep: {name} started{segment} on '
            f'{result["where"]}{" (resumed)" if result["resumed"] else ""}; '
            f'log {log_path(self._dir, name)}', flush=True)
      if result.get('exploit_dropped'):
        self._exploit_dropped(name)

    def _segment_ended(self, name: str, result: Dict[str, Any]) -> None:
      """A member reached a boundary: its score there, for the
      population's comparison (population.py)."""
      launch = self._running.pop(name)
      launch.update(ended=result['ended'], exit_code=0,
                    exit_reason='segment_end')
      self._boundary(name, result['segment_steps'], result['segment_return'],
                     result['values'])

    def _boundary(self, name: str, steps: int, value: float,
                  values: Dict[str, Any]) -> None:
      """A member's score at a boundary, for the population's comparison
      (population.py)."""
      self._entries[name].setdefault('segments', []).append(
          {'actor_steps': steps, 'return': value, 'values': values})
      self._save()
      print(f'acme-launch: sweep: {name} reached {steps:,} actor steps: '
            f'return {value:.1f}', flush=True)

    def _frozen(self, name: str, result: Dict[str, Any]) -> None:
      """A member frozen at a boundary, or thawed after the comparison:
      in its launch's `frozen` ([frozen at, actor steps, boundary, thawed
      at, actor steps then, the slot it runs on after])."""
      # (Not running any more: it copies another, told by the comparison
      # its freeze completed, before this result.)
      launch = self._running.get(name) or self._entries[name]['launches'][-1]
      spans = launch.setdefault('frozen', [])
      if result.get('frozen'):
        spans.append({'at': result['frozen'],
                      'actor_steps': result['frozen_steps'],
                      'boundary': result['segment_steps']})
      if result.get('thawed') and spans and 'thawed' not in spans[-1]:
        spans[-1].update(thawed=result['thawed'],
                         thawed_steps=result['thawed_steps'],
                         slot=result['slot'])
      self._save()

    def compared(self, steps: int) -> None:
      """The population is compared at `steps`: recorded (a --resume
      compares at the next boundary)."""
      self._record.setdefault('population', {})['compared'] = steps
      self._save()

    def left_out(self, steps: int, trial_ids: List[str]) -> None:
      """The population is compared at `steps` without these members,
      which ended before reaching it (population.make)."""
      names = [self._names.get(i, i) for i in trial_ids]
      self._record.setdefault('population', {}).setdefault(
          'left_out', []).append({'actor_steps': steps, 'members': names})
      self._save()
      self._told_after.append(
          f'acme-launch: sweep: the population is compared at {steps:,} '
          f'actor steps without {", ".join(names)}: ended before reaching '
          'it')

    def exploited(self, member_id: str, donor_id: str, at_steps: int,
                  scores: Tuple[float, float], before: Dict[str, Any],
                  after: Dict[str, Any], checkpoint: str) -> None:
      """The population's scheduler had a member copy a better one: the
      copy is staged in the member's run directory (trials.stage_exploit)
      and recorded before the member stops."""
      from acme_launch.sweep import population
      from acme_launch.sweep import trials
      member, donor = self._names[member_id], self._names[donor_id]
      donor_steps = int((layout.read_json(
          os.path.join(checkpoint, 'member.json'), {}) or {}).get(
              'actor_steps') or at_steps)
      trials.stage_exploit(os.path.join(self._dir, member), checkpoint, donor,
                           donor_steps, after, before)
      self._record.setdefault('population', {}).setdefault(
          'exploits', []).append({
              'actor_steps': at_steps, 'member': member, 'copied': donor,
              'member_return': scores[0], 'copied_return': scores[1],
              'copied_steps': donor_steps, 'before': before, 'after': after,
              'learner_copied': os.path.isdir(os.path.join(checkpoint,
                                                           'learner'))})
      launch = self._running.pop(member, None)
      if launch is not None:  # Running through: Tune stops it now.
        launch.update(ended=time.time(), exit_reason='copies ' + donor)
      self._save()
      self._told_after.append(
          f'acme-launch: sweep: at {at_steps:,} actor steps {member} '
          f'(return {scores[0]:.1f}) copies the learner of {donor} '
          f'(return {scores[1]:.1f}) and goes on with '
          f'{population.describe_change(before, after)}')

    def _ended(self, name: str, result: Dict[str, Any]) -> None:
      launch = self._running.pop(name)
      code, reason = result['exit_code'], result['exit_reason']
      launch.update(ended=result['ended'], exit_code=code, exit_reason=reason)
      self._save()
      seconds = result['ended'] - launch['started']
      if reason == 'budget_reached' and code == 0:
        summary = layout.read_json(
            layout.summary_path(os.path.join(self._dir, name)), {})
        final = final_return(summary)
        print(f'acme-launch: sweep: {name} reached its budget in '
              f'{seconds:.0f} s (final return '
              f'{"-" if final is None else f"{final:.1f}"})', flush=True)
        return
      failed = result.get('failed_node')
      log = log_path(self._dir, name)
      print(f'acme-launch: sweep: {name} ended without reaching its budget: '
            f'{reason}{f" ({failed})" if failed else ""}, exit {code}, after '
            f'{seconds:.0f} s; log {log}', flush=True)
      # Its launcher's output, the failed node's own last lines among them.
      tail = layout.log_tail(log, lines=30)
      if tail:
        print('acme-launch: sweep: the end of that log:\n' + ''.join(
            f'  | {line}\n' for line in tail.splitlines()), flush=True)

    def _exploit_dropped(self, name: str) -> None:
      """A member running through reached its budget before it stopped to
      copy another: the copy is not made, its launch now ends the run."""
      exploit = [e for e in self._record['population']['exploits']
                 if e['member'] == name][-1]
      exploit['dropped'] = 'it had reached its budget'
      self._save()
      print(f'acme-launch: sweep: {name} reached its budget before it '
            f'stopped to copy {exploit["copied"]}: it ends with its own '
            'learner', flush=True)

    def _progress_line(self, name: str) -> str:
      result = self._latest.get(name)
      if not result or 'progress_time' not in result:
        return f'progress: {name} | starting'
      steps = int(result['actor_steps'])
      budget = self._points[name].max_actor_steps
      eval_return = result.get('eval_return')
      return (f'progress: {name} | actor steps {steps:,}/{budget:,} '
              f'({100.0 * steps / budget:.0f}%) | '
              f'{self._rates[name].rate(time.time()):,.0f} env steps/s | '
              f'eval return '
              f'{"-" if eval_return is None else f"{eval_return:.1f}"}')

  return Reporter


class _Stop:
  """The sweep launcher's Ctrl-C and SIGTERM, passed to the trials through
  the control folder (trials.py): each signal once to each running child
  launcher; all killed once STOP_GRACE_SECONDS passed after the first. A
  signal before the folder exists (Ray still starting) is written there
  when it does, and no trial starts a point."""

  def __init__(self):
    self._control = ''
    self.signal = 0
    self._count = 0
    self._deadline = None

  def attach(self, control: str) -> None:
    self._control = control
    if self.signal:
      self._write(kill=False)

  def on_signal(self, signum, frame) -> None:
    from acme_launch.sweep import trials
    del frame
    self._count += 1
    if not self.signal:
      self.signal = signum
      self._deadline = time.time() + trials.STOP_GRACE_SECONDS
      print('acme-launch: sweep: stopping every program (checkpoints are '
            'being saved); Ctrl-C again to kill them.', flush=True)
    self._write(kill=False)

  def tick(self) -> None:
    if self._deadline is not None and time.time() > self._deadline:
      self._deadline = None
      self._write(kill=True)

  def _write(self, kill: bool) -> None:
    from acme_launch.sweep import trials
    if self._control:
      trials.write_stop(self._control, {'signal': self.signal,
                                        'count': self._count, 'kill': kill})


def _run_trials(options: SweepOptions, record: Dict[str, Any],
                todo: List[Tuple[Point, str]], slots: List[Slot]) -> int:
  """Runs `todo` ((point, state) pairs) as Tune trials; the signal that
  stopped the sweep, or 0."""
  if not todo:
    return 0
  stop = _Stop()
  previous = {s: signal.signal(s, stop.on_signal)
              for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    _fit(options, record, todo, slots, stop)
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
  return stop.signal


def _fit(options: SweepOptions, record: Dict[str, Any],
         todo: List[Tuple[Point, str]], slots: List[Slot],
         stop: _Stop) -> None:
  """Tune's run of the points, on the sweep's own Ray instance."""
  from ray import tune
  from acme_launch.sweep import trials
  # Members running through (or frozen between turns) hold a trial each at
  # once, on the slots.
  through = bool(record.get('members_at_once') or
                 record.get('members_frozen'))
  at_once = len(todo) if through else len(slots)
  with local_ray.started(at_once) as instance:
    print(f'acme-launch: sweep: Ray Tune on a local Ray instance, closed to '
          f'other users (started in {instance.start_seconds:.1f} s)',
          flush=True)
    # Again: ray.init sets a SIGTERM handler of its own (sys.exit).
    for signum in (signal.SIGINT, signal.SIGTERM):
      signal.signal(signum, stop.on_signal)
    stop.attach(instance.folder)
    reporter = _reporter_class()(options.sweep_dir, record,
                                 options.progress_every, stop)
    settings = record.get('scheduler') or {}
    points = {p.name: p for p, _ in todo}
    common = dict(
        sweep_dir=options.sweep_dir, control=instance.folder,
        cwd=record.get('cwd') or '', env=dict(os.environ),
        slots=tuple(slots), retries=int(record.get('trial_retries') or 0))
    param_space: Dict[str, Any] = {
        'point': tune.grid_search(list(points))}
    if population.is_population(record):
      space = settings['space']
      # A resumed population's members go on with the values they had,
      # or a copy recorded and not made yet; a comparison not recorded is
      # made again.
      for name in trials.undo_exploits(options.sweep_dir, record):
        print(f'acme-launch: sweep: {name}: its copy from a comparison not '
              'recorded before the stop is undone; compared there again',
              flush=True)
      layout.write_json_atomic(record_path(options.sweep_dir), record)
      entries = {e['name']: e for e in record['points']}
      first = {name: trials.first_values(
          os.path.join(options.sweep_dir, name),
          entries[name].get('values') or
          population.member_values(dict(p.fields), space))
               for name, p in points.items()}
      param_space['values'] = tune.sample_from(
          lambda spec: first[spec.config.point])
      trainable = trials.MemberTrial
      context = trials.TrialContext(
          argv={n: population.member_flags(
              record['base_argv'], p.args, [f for f, _ in p.fields], space)
                for n, p in points.items()},
          interval_steps=int(settings['interval_steps']),
          budget={n: p.max_actor_steps for n, p in points.items()},
          through=through, freeze=bool(record.get('members_frozen')),
          # Each member on its own slot, or sharing one; else a member
          # takes a free slot for each turn.
          member_slots=({n: i % len(slots) for i, n in enumerate(points)}
                        if record.get('members_at_once') else {}),
          **common)
      compared = int(record.get('population', {}).get('compared') or 0)
      trials.write_synced(instance.folder, compared)
      scheduler = population.make(
          settings, reporter.exploited, through=through, compared=compared,
          on_left_out=reporter.left_out,
          # Recorded, and told to the members, once each exploit there is
          # staged and recorded.
          on_compared=lambda steps: (reporter.compared(steps),
                                     trials.write_synced(instance.folder,
                                                         steps)))
      # Its advice to reuse trial workers: a member's segment starts a
      # whole program, against which a worker's start is small.
      warnings.filterwarnings('ignore', message='Consider boosting PBT')
    else:
      trainable = trials.PointTrial
      context = trials.TrialContext(
          argv={n: (*record['base_argv'], *p.args)
                for n, p in points.items()}, **common)
      scheduler = schedulers.make(settings, options.sweep_dir)
    tuner = tune.Tuner(
        tune.with_parameters(trainable, context=context),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            # A population's members all exist from the start (Tune's PBT
            # compares them); the instance's CPUs, one per slot, hold as
            # many trials at once as there are slots, as the limit does.
            max_concurrent_trials=(None if population.is_population(record)
                                   else len(slots)),
            reuse_actors=False, scheduler=scheduler),
        run_config=tune.RunConfig(
            name='tune', storage_path=instance.folder, verbose=0,
            callbacks=[reporter],
            # The programs checkpoint themselves, into their run
            # directories; a population's learner checkpoints pass through
            # Tune's (trials.MemberTrial).
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
            # A program that failed starts again (trials.Retry) as many
            # times as --trial_retries allows; the trial counts them.
            failure_config=tune.FailureConfig(
                max_failures=context.retries)))
    _skip_usage_tags()
    tuner.fit()


def _skip_usage_tags() -> None:
  """Tune's fit counts the callbacks it is given for Ray's usage
  statistics, importing its W&B, MLflow, Comet and Aim integrations to do
  so (wandb alone: 4-5 s of CPU at every sweep's start, measured here).
  The statistics are off (local_ray: RAY_USAGE_STATS_ENABLED=0), so the
  count is skipped; a Ray without that function is left as it is."""
  try:
    from ray.air._internal import usage
  except ImportError:
    return
  if hasattr(usage, 'tag_callbacks'):
    usage.tag_callbacks = lambda callbacks: False


# The whole sweep ------------------------------------------------------------


def run(options: SweepOptions, record: Dict[str, Any],
        todo: List[Tuple[Point, str]], slots: List[Slot]) -> int:
  """Runs the sweep to its end; prints and writes the table; exit code."""
  # Made (exclusively under a name chosen at random) or opened, checked on
  # its descriptor (safe_dirs.py), locked.
  rundir.take(options.sweep_dir, new=options.new_dir, what='sweep directory',
              folders=('logs',))
  record['slots'] = [dataclasses.asdict(s) for s in slots]
  if options.resume:  # Programs that ended after a kill of the last one.
    close_open_launches(options.sweep_dir, record)
  layout.write_json_atomic(record_path(options.sweep_dir), record)
  total = len(record['points'])
  print(f'acme-launch: sweep of {total} points of {record["config_name"]} '
        f'({", ".join(record["fields"])}){drawn(record)}: {len(todo)} to run, '
        f'{describe_at_once(record, todo, slots)}{_where(record)}'
        f'{describe_scheduler(record)}'
        f'{describe_retries(record)}; '
        f'sweep directory {options.sweep_dir}', flush=True)
  stopped_by = _run_trials(options, record, todo, slots)
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
