"""Plots a run or sweep directory: `python -m acme_launch.plot DIR [--out DIR]`.

A run directory gets two PNG files (into RUN_DIR/plots by default):
  eval_return.png       evaluation return against actor steps (mean, min-max)
  steps_per_second.png  actor env steps/s over wall time, from progress.csv
A sweep directory (one with sweep.json) gets three (into SWEEP_DIR/plots):
  eval_return.png       per setting (points that differ only in seed), the
                        mean evaluation return over its seeds against actor
                        steps, min-max across seeds shaded; for a population
                        (--sweep_scheduler=pbt) each member's curve, with
                        a mark where it copied a better member's learner
  final_return_intervals.png  per setting, the IQM, median and mean of its
                        runs' final returns, each with its 95% stratified
                        bootstrap interval (rliable's interval plot)
  performance_profile.png     per setting, the fraction of its runs whose
                        final return is above each score, 95% band shaded
                        (rliable's performance profile): a setting whose
                        curve lies above another's did better at every score
For a population the two give its members' points and profile alone, no
interval and no band: the bootstrap resamples runs as independent, and
members copy one another's learners (as the sweep table says).
The figures come from acme_launch/stats, as the sweep table's.
"""

import argparse
import os
import sys
from typing import Dict, List

import matplotlib
matplotlib.use('Agg')  # Files only; no display needed.
import matplotlib.pyplot as plt

from acme_launch.run import summary as summary_lib
from acme_launch.stats import library as stats
from acme_launch.sweep import record as sweep_record


def _read_csv(run_dir: str, name: str) -> List[Dict[str, float]]:
  """metrics/NAME's whole rows; a line for rows a kill cut (skipped, as
  wherever evaluations are read)."""
  rows, torn = summary_lib.read_csv_rows(os.path.join(run_dir, 'metrics', name))
  if torn:
    print(f'acme-launch plot: {summary_lib.torn_line(name, torn)}',
          file=sys.stderr)
  return rows


def _save(figure, axes, xlabel: str, ylabel: str, directory: str,
          out_path: str, legend: bool = True) -> None:
  """Labels, titles (after the run or sweep directory) and writes a figure."""
  axes.set_xlabel(xlabel)
  axes.set_ylabel(ylabel)
  axes.set_title(os.path.basename(os.path.normpath(directory)))
  axes.grid(alpha=0.3)
  if legend:
    axes.legend()
  figure.tight_layout()
  figure.savefig(out_path, dpi=100)
  plt.close(figure)


def plot_eval_return(run_dir: str, out_path: str) -> None:
  rows = summary_lib.evaluation_rows(run_dir)
  steps = [r['actor_steps'] for r in rows]
  figure, axes = plt.subplots(figsize=(7, 4))
  axes.plot(steps, [r['episode_return'] for r in rows], marker='o', label='mean')
  axes.fill_between(steps, [r.get('episode_return_min', r['episode_return']) for r in rows],
                    [r.get('episode_return_max', r['episode_return']) for r in rows],
                    alpha=0.2, label='min-max')
  _save(figure, axes, 'actor steps', 'evaluation return', run_dir, out_path)


def plot_steps_per_second(run_dir: str, out_path: str) -> None:
  rows = _read_csv(run_dir, 'progress.csv')
  times, rates = [], []
  for before, after in zip(rows, rows[1:]):
    elapsed = after['wall_time'] - before['wall_time']
    if elapsed > 0 and after['actor_steps'] >= before['actor_steps']:
      times.append(after['wall_time'] - rows[0]['wall_time'])
      rates.append((after['actor_steps'] - before['actor_steps']) / elapsed)
  figure, axes = plt.subplots(figsize=(7, 4))
  axes.plot(times, rates)
  _save(figure, axes, 'wall time (s)', 'actor env steps/s', run_dir, out_path,
        legend=False)


def plot_sweep(sweep_dir: str, out_path: str) -> bool:
  """One curve per setting: mean over seeds, min-max shaded; False if no
  point has an evaluation yet."""
  import numpy as np
  record = sweep_record.read_record(sweep_dir)
  if (record.get('scheduler') or {}).get('name') == 'pbt':
    return plot_population(sweep_dir, record, out_path)
  settings: Dict[str, List] = {}
  for point in record['points']:
    rows = summary_lib.evaluation_rows(os.path.join(sweep_dir, point['name']))
    if rows:
      settings.setdefault(point['setting'], []).append(
          ([r['actor_steps'] for r in rows], [r['episode_return'] for r in rows]))
  if not settings:
    return False
  figure, axes = plt.subplots(figsize=(7, 4))
  for setting, curves in settings.items():
    # Seeds evaluate at slightly different steps: one grid, up to where the
    # longest has data (a shorter one holds its last value).
    grid = np.linspace(0, max(max(s) for s, _ in curves), 50)
    values = np.array([np.interp(grid, s, r) for s, r in curves])
    name = setting or record.get('config_name', 'sweep')
    axes.plot(grid, values.mean(axis=0), label=f'{name} ({len(curves)} seeds)')
    axes.fill_between(grid, values.min(axis=0), values.max(axis=0), alpha=0.2)
  _save(figure, axes, 'actor steps',
        'evaluation return (mean over seeds, min-max)', sweep_dir, out_path)
  return True


def plot_population(sweep_dir: str, record, out_path: str) -> bool:
  """One curve per member of a population; at each exploit, a dotted line
  up from the member's score at the boundary to the score of the member it
  copied, in the member's color. False if no member has an evaluation yet."""
  curves = {}
  for point in record['points']:
    rows = summary_lib.evaluation_rows(os.path.join(sweep_dir, point['name']))
    if rows:
      curves[point['name']] = ([r['actor_steps'] for r in rows],
                               [r['episode_return'] for r in rows])
  if not curves:
    return False
  figure, axes = plt.subplots(figsize=(7, 4))
  colors = {}
  for name, (steps, returns) in curves.items():
    (line,) = axes.plot(steps, returns, label=name)
    colors[name] = line.get_color()
  exploits = [e for e in record.get('population', {}).get('exploits', [])
              if not e.get('dropped')]
  for e in exploits:
    member, copied = e['member'], e['copied']
    if member not in curves or copied not in curves:
      continue
    # From the member's score at the boundary to the one it copied.
    x = e['actor_steps']
    axes.plot([x, x], [e['member_return'], e['copied_return']],
              linestyle=':', color=colors[member])
    axes.plot([x], [e['copied_return']], marker='^', color=colors[member])
  axes.plot([], [], linestyle=':', marker='^', color='k',
            label=f'copies the learner of a better member ({len(exploits)})')
  _save(figure, axes, 'actor steps', 'evaluation return (each member)',
        sweep_dir, out_path)
  return True


def _finished_settings(sweep_dir: str):
  """(name, final returns, the table's estimates) of each setting with
  any; the table's notes; whether it is a population's."""
  table = sweep_record.summarize(sweep_dir, sweep_record.read_record(sweep_dir))
  return ([(s['setting'], s['returns'], s['final_return_intervals'])
           for s in table['settings'] if s['returns']], table['notes'],
          'population' in table)


def plot_sweep_intervals(settings, sweep_dir: str, out_path: str) -> None:
  """A row per setting and a panel per estimator: the point and its 95%
  interval as a bar (a point alone where the table gives none: one run,
  or a population's members)."""
  names = ('iqm', 'median', 'mean')
  figure, panels = plt.subplots(1, 3, figsize=(10, 1.2 + 0.5 * len(settings)),
                                sharey=True)
  for row, (_, _, estimates) in enumerate(settings):
    for panel, name in zip(panels, names):
      e = estimates[name]
      color = f'C{row % 10}'
      if e['low'] is not None:
        panel.barh(row, e['high'] - e['low'], left=e['low'], height=0.6,
                   color=color, alpha=0.6)
      panel.plot([e['value']], [row], marker='|', markersize=18, color='k')
  for panel, name in zip(panels, ('IQM', 'median', 'mean')):
    panel.set_title(name)
    panel.set_xlabel('final return')
    panel.grid(alpha=0.3, axis='x')
  panels[0].set_yticks(range(len(settings)))
  panels[0].set_yticklabels([f'{s} ({len(r)} runs)' for s, r, _ in settings])
  panels[0].invert_yaxis()
  figure.suptitle(f'{os.path.basename(os.path.normpath(sweep_dir))}: '
                  '95% stratified bootstrap intervals')
  figure.tight_layout()
  figure.savefig(out_path, dpi=100)
  plt.close(figure)


def plot_performance_profile(settings, sweep_dir: str, out_path: str,
                             band: bool = True) -> None:
  """Per setting, the fraction of runs above each score, 95% band shaded
  (with `band`: not over a population's members, which copy one another)."""
  import numpy as np
  every = np.concatenate([np.asarray(r, float) for _, r, _ in settings])
  margin = 0.05 * (every.max() - every.min() or abs(every.max()) or 1.0)
  thresholds = np.linspace(every.min() - margin, every.max() + margin, 101)
  figure, axes = plt.subplots(figsize=(7, 4))
  for setting, returns, _ in settings:
    profile, low, high = stats.performance_profile(returns, thresholds)
    (line,) = axes.plot(thresholds, profile,
                        label=f'{setting} ({len(returns)} runs)')
    if band and len(returns) > 1:
      axes.fill_between(thresholds, low, high, alpha=0.2,
                        color=line.get_color())
  axes.set_ylim(-0.02, 1.02)
  _save(figure, axes, 'final return (score)',
        'fraction of runs above the score', sweep_dir, out_path)


def _plot_sweep_dir(sweep_dir: str, out: str) -> int:
  os.makedirs(out, exist_ok=True)
  written = []
  if plot_sweep(sweep_dir, os.path.join(out, 'eval_return.png')):
    written.append(os.path.join(out, 'eval_return.png'))
  settings, notes, population = _finished_settings(sweep_dir)
  if population:
    notes.append('no interval or band over a population: members that copy '
                 'one another are not independent runs')
  for note in notes:
    print(f'acme-launch plot: {note}', file=sys.stderr)
  if settings:
    written.append(os.path.join(out, 'final_return_intervals.png'))
    plot_sweep_intervals(settings, sweep_dir, written[-1])
    written.append(os.path.join(out, 'performance_profile.png'))
    plot_performance_profile(settings, sweep_dir, written[-1],
                             band=not population)
    if not population and all(len(r) < 2 for _, r, _ in settings):
      print('acme-launch plot: fewer than two runs per setting: no interval '
            'can be given, points only', file=sys.stderr)
  if not written:
    print(f'acme-launch plot: error: no point of {sweep_dir} has an '
          'evaluation yet', file=sys.stderr)
    return 2
  for path in written:
    print(path)
  return 0


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m acme_launch.plot', description=__doc__.splitlines()[0])
  parser.add_argument('run_dir', help='a run or sweep directory made by '
                      'launch.py')
  parser.add_argument('--out', default='', help='folder for the PNG files '
                      '(default RUN_DIR/plots)')
  args = parser.parse_args(argv)
  if sweep_record.is_sweep_dir(args.run_dir):
    return _plot_sweep_dir(args.run_dir,
                           args.out or os.path.join(args.run_dir, 'plots'))
  progress_csv = os.path.join(args.run_dir, 'metrics', 'progress.csv')
  if not os.path.isfile(progress_csv):
    print(f'acme-launch plot: error: {args.run_dir} is not a run directory '
          '(no metrics/progress.csv)', file=sys.stderr)
    return 2
  out = args.out or os.path.join(args.run_dir, 'plots')
  os.makedirs(out, exist_ok=True)
  written = []
  rows, torn = summary_lib.read_evaluations(args.run_dir)
  for name, count in sorted(torn.items()):
    print(f'acme-launch plot: {summary_lib.torn_line(name, count)}',
          file=sys.stderr)
  if rows:
    written.append(os.path.join(out, 'eval_return.png'))
    plot_eval_return(args.run_dir, written[-1])
  written.append(os.path.join(out, 'steps_per_second.png'))
  plot_steps_per_second(args.run_dir, written[-1])
  for path in written:
    print(path)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
