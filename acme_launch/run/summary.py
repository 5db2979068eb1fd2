"""Final figures of a run, from what its nodes left in the run directory."""

import csv
import dataclasses
import glob
import os
from typing import Any, Dict, List, Optional, Tuple

from acme_launch import layout
from acme_launch.stats import spread


def evaluation_rows(run_dir: str) -> List[Dict[str, float]]:
  """Every evaluation row of every evaluator, in actor-step order."""
  return read_evaluations(run_dir)[0]


def evaluation_files(run_dir: str) -> List[str]:
  """Every evaluator's metrics CSV, by name."""
  return sorted(glob.glob(os.path.join(run_dir, 'metrics', 'evaluator_*.csv')))


def read_evaluations(run_dir: str) -> Tuple[List[Dict[str, float]],
                                            Dict[str, int]]:
  """(every whole evaluation row of every evaluator, in actor-step order;
  {file name: rows skipped as torn}). A kill can cut a node's last row; the
  resumed node starts its rows on a new line (program/nodes.py), so a torn
  row is one of the wrong length or with a field that is no number."""
  rows, torn = [], {}
  for path in evaluation_files(run_dir):
    whole, skipped = read_csv_rows(path)
    rows.extend(whole)
    if skipped:
      torn[os.path.basename(path)] = skipped
  rows.sort(key=lambda r: (r.get('actor_steps', 0), r.get('wall_time', 0)))
  return rows, torn


def read_csv_rows(path: str) -> Tuple[List[Dict[str, float]], int]:
  """(a metrics CSV's whole rows, in file order, as numbers by column; how
  many were skipped as torn: of the wrong length or with a field that is no
  number). Also plot.py's reader of progress.csv."""
  rows, torn = [], 0
  with open(path, newline='') as f:
    reader = csv.reader(f)
    header = next(reader, [])
    for fields in reader:
      row = _row(header, fields) if fields else {}
      if row is None:
        torn += 1
      elif row:
        rows.append(row)
  return rows, torn


def torn_line(name: str, torn: int) -> str:
  """What a reader says of metrics/NAME's `torn` rows skipped."""
  return (f'{torn} torn row{"s" if torn > 1 else ""} of metrics/{name} '
          'skipped (cut by a kill)')


def _row(header: List[str], fields: List[str]) -> Optional[Dict[str, float]]:
  """A CSV row's numbers by column, or None for a torn row."""
  if len(fields) != len(header):
    return None
  try:
    return {k: float(v) for k, v in zip(header, fields) if v != ''}
  except ValueError:
    return None


def make_summary(run_dir: str, outcome, max_actor_steps: int,
                 restored_actor_steps: int = 0,
                 auto_resumes: int = 0,
                 counts: Optional[Dict[str, float]] = None) -> Dict[str, Any]:
  """summary.json's content; steps/s counts this launch's steps only. The
  counter's totals are progress.json's unless given."""
  if counts is None:
    counts = layout.read_json(layout.progress_path(run_dir), {}).get('counts', {})
  evaluations = evaluation_rows(run_dir)
  last_eval: Optional[Dict[str, float]] = evaluations[-1] if evaluations else None
  actor_steps = int(counts.get('actor_steps', 0))
  wall_time = outcome.wall_time
  final = layout.read_json(layout.final_eval_path(run_dir))
  episodes = (spread.episode_spread(final['returns'])
              if final and final.get('returns') else {})
  return {
      'exit_reason': outcome.reason,
      'exit_code': outcome.exit_code,
      'failed_node': outcome.failed_node or None,
      'max_actor_steps': max_actor_steps,
      'actor_steps': actor_steps,
      'restored_actor_steps': restored_actor_steps,
      'actor_episodes': int(counts.get('actor_episodes', 0)),
      'learner_steps': int(counts.get('learner_steps', 0)),
      'evaluator_episodes': int(counts.get('evaluator_episodes', 0)),
      'evaluations': len(evaluations),
      'wall_time_seconds': round(wall_time, 2),
      'env_steps_per_second': (round((actor_steps - restored_actor_steps) /
                                     wall_time, 1) if wall_time else 0.0),
      'last_eval_return': last_eval['episode_return'] if last_eval else None,
      'last_eval_actor_steps': int(last_eval['actor_steps']) if last_eval else None,
      # At the budget, with the final parameters (None if not reached).
      'final_eval_return_mean': final['return_mean'] if final else None,
      'final_eval_return_std': final['return_std'] if final else None,
      'final_eval_episodes': final['episodes'] if final else None,
      'final_eval_actor_steps': final['actor_steps'] if final else None,
      # Its episodes' shape: a mean hides a policy that stands still from
      # some starts (stats/spread.py says when the episodes split).
      'final_eval_return_median': episodes.get('median'),
      'final_eval_return_min': episodes.get('min'),
      'final_eval_return_max': episodes.get('max'),
      'final_eval_split': episodes.get('split_sentence'),
      # Actors and evaluators started again after dying, per node.
      'node_restarts': dict(getattr(outcome, 'restarts', {}) or {}),
      'node_restarts_total': sum((getattr(outcome, 'restarts', {}) or {}).values()),
      'auto_resumes': auto_resumes,
  }


@dataclasses.dataclass(frozen=True)
class _AtBudget:
  """The outcome of a launch that found its run at its budget."""
  exit_code: int = 0
  reason: str = 'budget_reached'
  failed_node: str = ''
  wall_time: float = 0.0


def at_budget(run_dir: str, max_actor_steps: int,
              counts: Dict[str, float]) -> Dict[str, Any]:
  """summary.json of a launch that had nothing to do, its checkpointed
  counter (`counts`) at `max_actor_steps`: the run's summary when it said
  it reached the budget, else one made from `counts` and what the run's
  nodes left (the launch that reached it was killed before its summary, or
  stopped there), with no time spent."""
  previous = layout.read_json(layout.summary_path(run_dir), {}) or {}
  if (isinstance(previous, dict) and
      previous.get('exit_reason') == 'budget_reached' and
      int(previous.get('actor_steps') or 0) >= max_actor_steps):
    return previous
  steps = int(counts.get('actor_steps', 0))
  return make_summary(run_dir, _AtBudget(), max_actor_steps,
                      restored_actor_steps=steps, counts=counts)


def format_summary(summary: Dict[str, Any]) -> str:
  last_eval = summary['last_eval_return']
  eval_text = ('none' if last_eval is None else
               f'{last_eval:.1f} (at {summary["last_eval_actor_steps"]:,} actor steps)')
  lines = [
      f'exit reason        {summary["exit_reason"]}',
      f'actor steps        {summary["actor_steps"]:,} / {summary["max_actor_steps"]:,}',
      f'learner steps      {summary["learner_steps"]:,}',
      f'wall time          {summary["wall_time_seconds"]:.1f} s',
      f'env steps/s        {summary["env_steps_per_second"]:,.1f}',
      f'last eval return   {eval_text}',
  ]
  if summary.get('node_restarts_total') or summary.get('auto_resumes'):
    restarted = ', '.join(f'{node} x{count}' for node, count
                          in sorted(summary['node_restarts'].items()))
    lines.append(f'restarts           {restarted or "none"}; '
                 f'whole-program resumes {summary["auto_resumes"]}')
  if summary.get('final_eval_return_mean') is not None:
    lines.append(
        f'final eval return  {summary["final_eval_return_mean"]:.1f} +- '
        f'{summary["final_eval_return_std"]:.1f} ({summary["final_eval_episodes"]} '
        f'episodes at {summary["final_eval_actor_steps"]:,} actor steps)')
    if summary.get('final_eval_return_median') is not None:
      lines.append(
          f'final eval spread  median {summary["final_eval_return_median"]:.1f}, '
          f'lowest {summary["final_eval_return_min"]:.1f}, '
          f'highest {summary["final_eval_return_max"]:.1f}')
    if summary.get('final_eval_split'):
      lines.append(f'final eval split   {summary["final_eval_split"]}')
  return '\n'.join(lines)
