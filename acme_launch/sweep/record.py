"""The sweep record: its files, sweep.json, each point's state and flags,
and the table of results (sweep_summary.json).

Per setting the table gives, beside the mean +- std over seeds, the IQM,
median and mean of the final returns, each with its 95% stratified
bootstrap interval (acme_launch/stats): a handful of seeds moves a mean a
lot, and an interval says how much."""

from __future__ import annotations

import datetime
import os
import statistics
from typing import Any, Dict, List, Optional, Sequence

from acme_launch import credentials
from acme_launch import errors
from acme_launch import layout
from acme_launch.run import summary as summary_lib
from acme_launch.stats import library as stats
from acme_launch.stats import metrics
from acme_launch.sweep import schedulers
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.points import SEED_FIELD, Point


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
  record = {
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
  if options.tracking_uri:  # Masked: a resume asks for it again.
    record['tracking_uri'] = credentials.mask(options.tracking_uri)
  if options.trial_retries:
    record['trial_retries'] = options.trial_retries
  if options.samples:  # Random search: how its points were drawn.
    record['random_search'] = {'samples': options.samples,
                               'seed': options.sample_seed,
                               'specs': list(options.specs)}
  return record


def points_of(record: Dict[str, Any]) -> List[Point]:
  return [Point(p['name'], tuple(p['fields'].items()), tuple(p['args']),
                int(p['max_actor_steps']), bool(p.get('uses_gpus')))
          for p in record['points']]


def own_budget(run_dir: str) -> Optional[int]:
  """The budget its sweep's sweep.json gives the point whose run directory
  is `run_dir` (a population member's segments have budgets of their own
  on the way), or None for a run outside a sweep."""
  parent, name = os.path.split(os.path.normpath(run_dir))
  record = layout.read_json(record_path(parent)) if parent else None
  points = record.get('points') if isinstance(record, dict) else None
  for point in points if isinstance(points, list) else ():
    if isinstance(point, dict) and point.get('name') == name:
      return int(point['max_actor_steps'])
  return None


def reached_budget(summary: Any, max_actor_steps: int) -> bool:
  """Whether a point's summary.json says it reached the point's budget. A
  population's member reaches the budget of each segment on the way
  (population.py): only the point's own counts."""
  if not isinstance(summary, dict):
    return False
  budget = int(summary.get('max_actor_steps') or max_actor_steps)
  return (summary.get('exit_reason') == 'budget_reached' and
          budget >= max_actor_steps)


def point_state(sweep_dir: str, point: Point) -> str:
  """'done' (its summary.json says it reached its budget, or the sweep's
  scheduler stopped it early), 'started' (its run directory has a
  config.json) or 'new'."""
  run_dir = os.path.join(sweep_dir, point.name)
  summary = layout.read_json(layout.summary_path(run_dir), {})
  if (reached_budget(summary, point.max_actor_steps) or
      schedulers.read_stopped_early(run_dir) is not None):
    return 'done'
  return 'started' if os.path.isfile(layout.config_path(run_dir)) else 'new'


def close_open_launches(sweep_dir: str, record: Dict[str, Any]) -> List[str]:
  """Ends, from its run directory, each launch the record still has open
  (the sweep launcher was killed before it heard how the program ended):
  a summary.json written after the launch started says when and why. Such
  a program may have reached its budget after the kill (it is not run
  again). Returns the points whose launch was closed."""
  closed = []
  for entry in record['points']:
    launch = entry['launches'][-1] if entry['launches'] else None
    if launch is None or launch.get('ended') is not None:
      continue
    path = layout.summary_path(os.path.join(sweep_dir, entry['name']))
    try:
      written = os.path.getmtime(path)
    except OSError:
      continue
    summary = layout.read_json(path, {}) if written >= launch['started'] else {}
    if not summary or not isinstance(summary, dict):
      continue
    reason = summary.get('exit_reason')
    if reason == 'budget_reached' and 'segment_end' in launch:
      reason = 'segment_end'  # A member's turn (population.py).
    launch.update(ended=written, exit_code=summary.get('exit_code'),
                  exit_reason=reason)
    closed.append(entry['name'])
  return closed


def point_args(sweep_dir: str, record: Dict[str, Any], point: Point,
               state: str) -> List[str]:
  """The child's launch.py flags: base, the point's fields, its run dir."""
  run_dir = os.path.join(sweep_dir, point.name)
  where = ([f'--resume={run_dir}'] if state == 'started' else
           [f'--workdir={sweep_dir}', f'--run_name={point.name}'])
  return [*record['base_argv'], *point.args, *where]


def final_return(summary: Dict[str, Any]) -> Optional[float]:
  """The final evaluation's mean, else the last evaluation's return."""
  value = summary.get('final_eval_return_mean')
  return summary.get('last_eval_return') if value is None else value


def read_point_summary(run_dir: str, name: str):
  """(summary.json of a point's run, or {}; a line naming what is wrong with
  it, or None). A point not started yet has none, and that is no fault."""
  path = layout.summary_path(run_dir)
  if not os.path.isdir(run_dir):
    return {}, None
  try:
    summary = layout.read_json(path)
  except OSError as e:
    return {}, f'{name}: cannot read {path}: {e.strerror or e}'
  if summary is None:
    missing = not os.path.lexists(path)
    return {}, (f'{name}: no summary.json in {run_dir}' if missing else
                f'{name}: {path} is unreadable (damaged or a link)')
  if not isinstance(summary, dict):
    return {}, f'{name}: {path} is not a summary (not a JSON object)'
  return summary, None


def _torn_notes(run_dir: str, name: str) -> List[str]:
  """A line per metrics file of the point with rows torn by a kill (left
  out of its evaluations, run/summary.py)."""
  torn = summary_lib.read_evaluations(run_dir)[1]
  return [f'{name}: {summary_lib.torn_line(file, n)}'
          for file, n in sorted(torn.items())]


def _exit_reason(summary: Dict[str, Any], reached: bool, stopped,
                 launches: List[Dict[str, Any]]) -> str:
  """A point's row's exit reason: a member's segment that ended at its
  own budget short of the member's says `segment_end` (population.py)."""
  if stopped:
    return schedulers.STOPPED_EARLY
  reason = summary.get('exit_reason')
  if reason == 'budget_reached' and not reached:
    return 'segment_end'
  return reason or (launches[-1]['exit_reason'] if launches
                    else 'not started')


def summarize_setting(setting: str, seeds: List[Any], finals: List[float],
                      intervals: bool = True) -> Dict[str, Any]:
  """One setting's row over its seeds: mean +- std (as bench/learning.py:
  the population deviation), and the IQM, median and mean with their 95%
  bootstrap intervals (none with fewer than two runs, nor without
  `intervals`: the point estimates alone)."""
  row: Dict[str, Any] = {
      'setting': setting, 'seeds': seeds, 'returns': finals,
      'final_return_mean': statistics.fmean(finals) if finals else None,
      'final_return_std': statistics.pstdev(finals) if finals else None,
      'runs': len(finals),
  }
  if finals and not intervals:
    row['final_return_intervals'] = {
        name: {'value': float(statistic(metrics.as_matrix(finals))),
               'low': None, 'high': None}
        for name, statistic in metrics.AGGREGATES.items()}
  elif finals:
    row['final_return_intervals'] = stats.interval_estimates(finals)
    row['interval'] = {'confidence': stats.CONFIDENCE, 'reps': stats.REPS,
                       'seed': stats.SEED, 'method': 'stratified percentile '
                       'bootstrap over runs'}
  return row


def summarize(sweep_dir: str, record: Dict[str, Any]) -> Dict[str, Any]:
  """sweep_summary.json: a row per point, then per setting over seeds;
  `notes`, a line per point whose run summary is missing or unreadable."""
  rows, notes = [], []
  for entry in record['points']:
    run_dir = os.path.join(sweep_dir, entry['name'])
    summary, problem = read_point_summary(run_dir, entry['name'])
    if problem:
      notes.append(problem)
    notes.extend(_torn_notes(run_dir, entry['name']))
    stopped = schedulers.read_stopped_early(run_dir)
    reached = reached_budget(summary, int(entry['max_actor_steps']))
    launches = entry.get('launches', [])
    launcher_seconds = sum((l['ended'] or l['started']) - l['started']
                           for l in launches)
    rows.append({
        'point': entry['name'], 'setting': entry['setting'],
        'fields': entry['fields'], 'run_dir': run_dir,
        'exit_reason': _exit_reason(summary, reached, stopped, launches),
        'budget_reached': reached,
        # Where and why the scheduler stopped it (schedulers.py), or None.
        'stopped_early': stopped,
        'actor_steps': summary.get('actor_steps'),
        'max_actor_steps': int(entry['max_actor_steps']),
        # The return at the budget, or where the scheduler stopped it; a
        # point that failed short of its budget has none, only its last
        # evaluation's, apart (a mid-run return is no final one).
        'final_return': (final_return(summary) if reached or stopped
                         else None),
        'last_return': summary.get('last_eval_return'),
        'last_return_actor_steps': summary.get('last_eval_actor_steps'),
        'wall_time_seconds': summary.get('wall_time_seconds'),
        'launcher_seconds': round(launcher_seconds, 1),
        'launches': len(launches),
    })
  if (record.get('scheduler') or {}).get('name') == 'pbt':
    return _summarize_population(record, rows, notes)
  settings = []
  for setting in dict.fromkeys(r['setting'] for r in rows):
    group = [r for r in rows if r['setting'] == setting]
    settings.append(summarize_setting(
        setting or record.get('config_name', ''),
        [r['fields'].get(SEED_FIELD) for r in group],
        # A point stopped early has no return at the budget to count.
        [r['final_return'] for r in group
         if r['final_return'] is not None and not r['stopped_early']]))
  return {'points': rows, 'settings': settings, 'notes': notes,
          'failed': [r['point'] for r in rows
                     if not r['budget_reached'] and not r['stopped_early']]}


def _summarize_population(record: Dict[str, Any], rows: List[Dict[str, Any]],
                          notes: List[str]) -> Dict[str, Any]:
  """A population's table: each member with the values it ended with and
  what it copied; the members' final returns as one group (their values
  moved, so a setting is not a group here); the best member."""
  exploits = [e for e in record.get('population', {}).get('exploits', [])
              if not e.get('dropped')]
  entries = {e['name']: e for e in record['points']}
  for row in rows:
    entry = entries[row['point']]
    row['values'] = entry.get('values', {})
    row['copied'] = [(e['actor_steps'], e['copied']) for e in exploits
                     if e['member'] == row['point']]
    # Its segments' launches: the program's own wall time is the last's.
    row['wall_time_seconds'] = row['launcher_seconds']
  finished = [r for r in rows if r['final_return'] is not None and
              r['budget_reached']]
  best = max(finished, key=lambda r: r['final_return'], default=None)
  return {'points': rows, 'notes': notes,
          # No bootstrap interval: it would resample the members as
          # independent runs, and members copy one another's learners.
          'settings': [summarize_setting(
              'population', [], [r['final_return'] for r in finished],
              intervals=False)],
          'population': {
              'members': len(rows), 'exploits': len(exploits),
              # Compared without members that ended before a boundary.
              'left_out': record.get('population', {}).get('left_out', []),
              'best': best and best['point'],
              'best_return': best and best['final_return']},
          'failed': [r['point'] for r in rows if not r['budget_reached']]}


def _format_population(table: Dict[str, Any], width: int) -> List[str]:
  lines = [f'{"member":<{width}}  {"exit reason":<16} {"final return":>12} '
           f'{"wall time":>10}  values at the end; copied']
  for r in table['points']:
    wall = r['wall_time_seconds']
    values = ', '.join(f'{f}={v}' for f, v in r['values'].items())
    copied = ', '.join(f'{name} at {steps:,}' for steps, name in r['copied'])
    lines.append(f'{r["point"]:<{width}}  {r["exit_reason"]:<16} '
                 f'{_number(r["final_return"]):>12} '
                 f'{"-" if wall is None else f"{wall:.1f} s":>10}  '
                 f'{values or "-"}; {copied or "-"}')
  population = table['population']
  lines += ['', f'population of {population["members"]}: '
            f'{population["exploits"]} exploits; best member '
            f'{population["best"] or "-"} (final return '
            f'{_number(population["best_return"])})', '']
  lines.extend(format_intervals(table['settings'], width))
  lines.append('no interval over a population: members that copy one '
               'another are not independent runs')
  lines.extend(_failed_lines(table))
  lines.extend(table.get('notes', []))
  return lines


def _failed_lines(table: Dict[str, Any]) -> List[str]:
  """A line per point that did not reach its budget, with its last
  evaluation's return: left out of every figure, shown apart."""
  lines = [failed_line(r) for r in table['points']
           if r['point'] in table['failed']]
  return [''] + lines if lines else []


def failed_line(r: Dict[str, Any]) -> str:
  """The line of a run that did not reach its budget (`r`: its row of the
  table), with its last evaluation's return (also compare.py's)."""
  if r['last_return'] is None:
    steps, what = r['actor_steps'], 'no evaluation, at'
  else:
    steps = r['last_return_actor_steps']
    what = f'last return {r["last_return"]:.1f} at'
  budget = r['max_actor_steps']
  return (f'{r["point"]} did not reach its budget ({r["exit_reason"]}):'
          f' {what} {"-" if steps is None else f"{steps:,}"} of '
          f'{"-" if budget is None else f"{budget:,}"} actor steps')


def _number(value: Optional[float], spec: str = '.1f') -> str:
  return '-' if value is None else format(value, spec)


def format_intervals(settings: List[Dict[str, Any]], width: int) -> List[str]:
  """The settings' IQM, median and mean with their 95% intervals, and a line
  for those with fewer than two runs, where no interval can be given."""
  lines = [f'{"setting":<{width}}  {"runs":>4}  final return IQM, median, '
           'mean [95% bootstrap interval]']
  alone = []
  for s in settings:
    intervals = s.get('final_return_intervals')
    if not intervals:
      figure = '-'
    else:
      figure = stats.estimates_text(intervals)
      if s['runs'] < 2:
        alone.append(s['setting'])
    lines.append(f'{s["setting"]:<{width}}  {s.get("runs", 0):>4}  {figure}')
  if alone:
    lines.append(f'fewer than two runs in {", ".join(alone)}: no interval '
                 'can be given, point estimates only')
  return lines


def format_table(table: Dict[str, Any]) -> str:
  width = max([len(r['point']) for r in table['points']] +
              [len(s['setting']) for s in table['settings']] + [7])
  if 'population' in table:
    return '\n'.join(_format_population(table, width))
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
  lines.append('')
  lines.extend(format_intervals(table['settings'], width))
  lines.extend(_failed_lines(table))
  lines.extend(table.get('notes', []))
  stopped = [r for r in table['points'] if r.get('stopped_early')]
  if stopped:
    lines.append('')
    lines += [f'{r["point"]} stopped early: {r["stopped_early"]["why"]}'
              for r in stopped]
  return '\n'.join(lines)
