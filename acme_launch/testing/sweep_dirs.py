"""Sweep directories with finished points, written without launching: the
files a sweep leaves (sweep.json by the record's own writer, each point's
summary.json, final_eval.json and evaluator CSV), for tests of what reads
them (the table, the comparison, the plots). A launch costs a minute; a
point's figures are what these tests are about."""

import csv
import os
from typing import Dict, List, Optional

from acme_launch import layout
from acme_launch.sweep import record as sweep_record
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.points import Point


def write_run(run_dir: str, final: float, steps: int = 1000,
              episodes: Optional[List[float]] = None) -> None:
  """A run directory that reached `steps` with final return `final`."""
  os.makedirs(os.path.join(run_dir, 'metrics'), exist_ok=True)
  episodes = episodes or [final] * 3
  layout.write_json_atomic(layout.final_eval_path(run_dir), {
      'actor_steps': steps, 'episodes': len(episodes),
      'return_mean': final, 'return_std': 0.0, 'returns': episodes,
      'lengths': [100] * len(episodes), 'seconds': 0.1})
  layout.write_json_atomic(layout.summary_path(run_dir), {
      'exit_reason': 'budget_reached', 'actor_steps': steps,
      'final_eval_return_mean': final, 'final_eval_actor_steps': steps,
      'last_eval_return': final / 2, 'wall_time_seconds': 10.0})
  with open(os.path.join(run_dir, 'metrics', 'evaluator_0.csv'), 'w',
            newline='') as f:
    writer = csv.DictWriter(f, ['actor_steps', 'episode_return'])
    writer.writeheader()
    for i in range(1, 5):
      writer.writerow({'actor_steps': steps * i // 4,
                       'episode_return': final * i / 4})


def write_sweep(sweep_dir: str, finals: Dict[str, List[Optional[float]]],
                field: str = 'ppo.learning_rate', steps: int = 1000,
                config: Optional[Dict[str, Dict]] = None) -> List[str]:
  """A sweep of `field` x seed: finals[VALUE] lists each seed's final
  return (None: a point not run). Its points' names, in order."""
  points = []
  for value, returns in finals.items():
    for seed in range(len(returns)):
      fields = ((field, value), ('seed', seed))
      name = ','.join(f'{f}={v}' for f, v in fields)
      points.append(Point(name, fields, tuple(f'--config.{f}={v}' for f, v in
                                              fields), steps))
  options = SweepOptions(sweep_dir=sweep_dir, resume=False,
                         base_argv=('--config=smoke',))
  os.makedirs(sweep_dir, exist_ok=True)
  record = sweep_record.new_record(options, points, [field, 'seed'])
  layout.write_json_atomic(sweep_record.record_path(sweep_dir), record)
  for point in points:
    value = dict(point.fields)[field]
    final = finals[value][dict(point.fields)['seed']]
    if final is not None:
      write_run(os.path.join(sweep_dir, point.name), final, steps)
      layout.write_json_atomic(
          layout.config_path(os.path.join(sweep_dir, point.name)),
          {'config': {**(config or {}).get(value, {}),
                      field: value, 'seed': dict(point.fields)['seed']}})
  return [p.name for p in points]
