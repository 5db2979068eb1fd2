"""Is this setting better than that one? `python -m acme_launch.compare`.

    python -m acme_launch.compare SWEEP_DIR --field=ppo.learning_rate
    python -m acme_launch.compare --a RUN_DIR [RUN_DIR ...] --b RUN_DIR [...]

Two run groups' final returns (each run's final evaluation mean, else its
last evaluation, as the sweep table reads them, of the runs that reached
their budget): per group the IQM, median
and mean with 95% bootstrap intervals, then the probability of improvement
P(A > B), the chance that a run of A ends above a run of B, with its 95%
interval (Agarwal et al. 2021; acme_launch/stats). An interval that holds
0.5 says the runs cannot tell the two apart. A sweep is grouped by the
values of --field (every pair of values is compared; the sweep's other
fields, seed aside, are pooled and named). Two lists of run directories
are compared as given, each against its budget (a sweep's point's, from
its sweep.json: a population member ends each segment at that segment's
budget); the fields their configs (config.json) differ in,
seed and the --field ones aside, are named, since a difference there may be
what made the difference.

A run whose summary is missing or unreadable is named in one line and left
out, and so is a run that did not reach its budget (a failed node's
mid-run return is no final one: its last return is shown in its line, as
under the sweep table); a group left with no run is the one line of bad
input (exit 2).
"""

import argparse
import itertools
import os
import sys
from typing import Any, Dict, List, Sequence, Tuple

from acme_launch import errors
from acme_launch import layout
from acme_launch.stats import library as stats
from acme_launch.sweep import record as sweep_record
from acme_launch.sweep.points import SEED_FIELD

Group = Tuple[str, List[float]]   # (name, final returns)


def _flat(config: Dict[str, Any], prefix: str = '') -> Dict[str, Any]:
  flat = {}
  for key, value in config.items():
    if isinstance(value, dict):
      flat.update(_flat(value, f'{prefix}{key}.'))
    else:
      flat[prefix + key] = value
  return flat


def run_returns(run_dirs: Sequence[str], notes: List[str],
                budgets: Sequence[int] = ()) -> List[float]:
  """The final returns of the runs that reached their budget (`budgets`,
  else each summary's own); a note for each not, with its last return."""
  finals = []
  for run_dir, budget in itertools.zip_longest(run_dirs, budgets[:len(run_dirs)]):
    summary, problem = sweep_record.read_point_summary(run_dir, run_dir)
    if not os.path.isdir(run_dir):
      problem = f'{run_dir}: no such run directory'
    value = sweep_record.final_return(summary)
    if problem or value is None:
      notes.append(problem or f'{run_dir}: no evaluation in its summary.json')
    elif not sweep_record.reached_budget(summary, budget or 0):
      notes.append(_short_line(run_dir, summary, budget))
    else:
      finals.append(float(value))
  return finals


def _short_line(run_dir: str, summary: Dict[str, Any], budget) -> str:
  """A run that did not reach its budget: out of the figures, its last
  evaluation's return apart (a mid-run return is no final one)."""
  budget = budget or summary.get('max_actor_steps')
  reason = summary.get('exit_reason')
  return sweep_record.failed_line({
      'point': run_dir, 'exit_reason': (
          'segment_end' if reason == 'budget_reached' else reason),
      'last_return': summary.get('last_eval_return'),
      'last_return_actor_steps': summary.get('last_eval_actor_steps'),
      'actor_steps': summary.get('actor_steps'),
      'max_actor_steps': None if budget is None else int(budget)})


def differing_fields(groups: Dict[str, Sequence[str]],
                     compared: Sequence[str]) -> Dict[str, Dict[str, list]]:
  """{field: {group: its values}} for every config field, seed and
  `compared` aside, whose values are not the same in all the runs."""
  values: Dict[str, Dict[str, list]] = {}
  for name, run_dirs in groups.items():
    for run_dir in run_dirs:
      try:
        saved = layout.read_json(layout.config_path(run_dir))
      except OSError:  # Unreadable: its summary's note names the run.
        saved = None
      config = saved.get('config') if isinstance(saved, dict) else None
      for field, value in _flat(config if isinstance(config, dict) else {}).items():
        seen = values.setdefault(field, {}).setdefault(name, [])
        if repr(value) not in map(repr, seen):
          seen.append(value)
  skip = {SEED_FIELD, *compared}
  return {field: by_group for field, by_group in sorted(values.items())
          if field not in skip and
          len({repr(v) for vs in by_group.values() for v in vs}) > 1}


def sweep_groups(sweep_dir: str, fields: Sequence[str],
                 notes: List[str]) -> Tuple[List[Group], List[str]]:
  """The sweep's points grouped by their values of `fields`; the sweep's
  other fields (pooled in each group)."""
  record = sweep_record.read_record(sweep_dir)
  unknown = [f for f in fields if f not in record['fields']]
  if unknown:
    raise errors.LaunchError(
        f'{sweep_dir} sweeps {", ".join(record["fields"])}, not '
        f'{", ".join(unknown)}')
  grouped: Dict[str, List[Tuple[str, int]]] = {}
  for point in record['points']:
    key = ','.join(f'{f}={point["fields"][f]}' for f in fields)
    run_dir = os.path.join(sweep_dir, point['name'])
    if os.path.isdir(run_dir):  # Started points.
      grouped.setdefault(key, []).append(
          (run_dir, int(point['max_actor_steps'])))
  groups = []
  for key, runs in grouped.items():
    groups.append((key, run_returns([d for d, _ in runs], notes,
                                    [b for _, b in runs])))
  pooled = [f for f in record['fields'] if f not in fields and f != SEED_FIELD]
  return groups, pooled


def compare(groups: List[Group]) -> List[Dict[str, Any]]:
  """P(A > B) with its interval for each ordered pair (A before B)."""
  rows = []
  for (a, xs), (b, ys) in itertools.combinations(groups, 2):
    if xs and ys:
      value, low, high = stats.probability_of_improvement(xs, ys)
      if len(xs) < 2 or len(ys) < 2:
        low = high = None
      rows.append({'a': a, 'b': b, 'value': value, 'low': low, 'high': high})
  return rows


def format_report(groups: List[Group], pairs: List[Dict[str, Any]],
                  notes: List[str]) -> str:
  width = max([len(name) for name, _ in groups] + [5])
  lines = [f'{"group":<{width}}  {"runs":>4}  final return IQM, median, mean '
           '[95% bootstrap interval]']
  for name, finals in groups:
    if not finals:
      lines.append(f'{name:<{width}}  {0:>4}  -')
      continue
    lines.append(f'{name:<{width}}  {len(finals):>4}  '
                 f'{stats.estimates_text(stats.interval_estimates(finals))}')
  lines.append('')
  for p in pairs:
    interval = (f' [{p["low"]:.2f}, {p["high"]:.2f}]' if p['low'] is not None
                else ' (fewer than two runs in a group: no interval can be '
                'given)')
    lines.append(f'P({p["a"]} > {p["b"]}) = {p["value"]:.2f}{interval}')
  lines.append('P(A > B): the chance that a run of A ends above a run of B; '
               'an interval holding 0.50 cannot tell them apart.')
  lines.extend(notes)
  return '\n'.join(lines)


def _values(by_group: Dict[str, list]) -> str:
  return '; '.join(f'{name}: {", ".join(repr(v) for v in values)}'
                   for name, values in by_group.items())


def run(args) -> str:
  notes: List[str] = []
  fields = [f for f in args.field if f]
  if args.sweep_dir:
    if args.a or args.b:
      raise errors.LaunchError('give a sweep directory or --a and --b, not both')
    if not sweep_record.is_sweep_dir(args.sweep_dir):
      raise errors.LaunchError(f'{args.sweep_dir} is not a sweep directory '
                               '(no sweep.json)')
    if not fields:
      raise errors.LaunchError('--field: which swept field to compare by')
    groups, pooled = sweep_groups(args.sweep_dir, fields, notes)
    if pooled:
      notes.append(f'pooled in each group: every value of {", ".join(pooled)}'
                   ' (the groups differ in more than the compared fields)')
  else:
    lists = {'A': list(args.a or []), 'B': list(args.b or [])}
    if not lists['A'] or not lists['B']:
      raise errors.LaunchError('give a sweep directory, or --a RUN_DIR ... '
                               'and --b RUN_DIR ...')
    # A sweep's point: the budget sweep.json gives it (a population
    # member's segments end `budget_reached` at their own).
    groups = [(name, run_returns(dirs, notes, [
        sweep_record.own_budget(d) for d in dirs]))
              for name, dirs in lists.items()]
    for field, by_group in differing_fields(lists, fields).items():
      notes.append(f'the configs also differ in {field} ({_values(by_group)})')
  empty = [name for name, finals in groups if not finals]
  if len(groups) - len(empty) < 2:
    raise errors.LaunchError(
        'fewer than two groups with a final return: '
        f'{", ".join(empty) or "only one group"}'
        + (f' ({notes[0]})' if notes else ''))
  return format_report(groups, compare(groups), notes)


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m acme_launch.compare',
      description=__doc__.splitlines()[0])
  parser.add_argument('sweep_dir', nargs='?', default='',
                      help='a sweep directory (with sweep.json)')
  parser.add_argument('--field', action='append', default=[],
                      help='the swept field to group by (repeat for more); '
                      'with --a/--b, fields whose differences are expected')
  # Run directories, not a comma-separated list: a sweep point's name
  # holds commas (ppo.learning_rate=0.001,seed=0).
  parser.add_argument('--a', nargs='+', default=[], help='run directories')
  parser.add_argument('--b', nargs='+', default=[], help='run directories')
  args = parser.parse_args(argv)
  try:
    print(run(args))
  except errors.LaunchError as e:
    print(f'acme-launch compare: error: {e}', file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
