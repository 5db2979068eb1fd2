"""Learning results matrix: configs x tasks x seeds, to their step budgets.

    .venv/bin/python bench/learning.py [--configs=ppo_mujoco] \
        [--envs=HalfCheetah-v4,Hopper-v4] [--seeds=0,1,2] [--steps=1000000] \
        [--out=bench/out] [--name=learning] [-- extra launch.py flags]

Each cell (config, task) runs `launch.py` once per seed, one after the other,
each in its own run directory under OUT/NAME/CONFIG/TASK/seedN, then
prints one table: the final evaluation (the evaluator's episodes at the
budget, with the final parameters) as mean +- std over seeds, wall time and
env steps/s per seed, then the IQM, median and mean over seeds with 95%
stratified bootstrap intervals (acme_launch/stats, as the sweep table); and writes OUT/NAME.json and one PNG per task,
OUT/NAME_TASK.png (each config's mean evaluation return over seeds
against actor steps, min-max over seeds shaded). A run that already reached
its budget is not run again, so an interrupted matrix resumes cell by cell;
compare variants (extra launch flags) under different `--name`s.
Each run's evaluation curve and its final evaluation's episode returns
are kept in OUT/NAME.json, so
`--merge=A.json,B.json --name=C` pools matrices run apart (other seeds,
other sessions, other machines) into one table and plots without their run
directories.
`--steps` defaults to each config's own budget; `--envs` to its own task.
An unknown config or task in the lists is one line and exit 2, before
anything runs.
"""

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Optional

from acme_launch.stats import library as stats
from acme_launch.stats import spread
from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
  print(f'bench/learning.py: error: {message}', file=sys.stderr)
  sys.exit(EXIT_BAD_INPUT)


def _load_config(name: str):
  """The registry config `name`, or a one-line exit 2."""
  from acme_launch import errors
  from acme_launch.config import registry
  try:
    return registry.load(name)
  except errors.LaunchError as e:
    _fail(str(e))


def _check_task(config, task: str) -> None:
  from acme_launch import envs as environments
  from acme_launch import errors
  try:
    environments.check_task(task, config.get('env_backend', 'gym'))
  except errors.LaunchError as e:
    _fail(str(e))


def _finished(run_dir: str, steps: int) -> Optional[dict]:
  """The summary of a run that already reached `steps`, else None."""
  try:
    with open(os.path.join(run_dir, 'summary.json')) as f:
      summary = json.load(f)
  except (OSError, ValueError):
    return None
  if summary.get('exit_reason') == 'budget_reached' and (
      summary.get('actor_steps', 0) >= steps):
    return summary
  return None


def run_seed(config_name: str, task: str, seed: int, steps: int,
             workdir: str, launch_flags: List[str]) -> dict:
  """One launch to the budget (or its finished summary); summary + run_dir."""
  run_dir = os.path.join(workdir, config_name, task.replace(':', '_'),
                         f'seed{seed}')
  summary = _finished(run_dir, steps)
  if summary is None:
    # A run cut short resumes from its checkpoints (same run directory).
    command = launch_command(
        f'--config={config_name}', f'--config.env_name={task}',
        f'--config.max_actor_steps={steps}', f'--config.seed={seed}',
        f'--workdir={os.path.dirname(run_dir)}',
        f'--run_name={os.path.basename(run_dir)}', '--progress_every=60',
        *launch_flags)
    print('running:', ' '.join(command[1:]), flush=True)
    subprocess.run(command, cwd=REPO_ROOT, check=False)
    summary = _finished(run_dir, steps) or {'exit_reason': 'did_not_finish'}
  else:
    print(f'finished before: {run_dir}', flush=True)
  return {**summary, 'seed': seed, 'run_dir': run_dir}


def evaluation_curve(run: dict) -> Optional[List[List[float]]]:
  """[actor steps, mean evaluation return] pairs, the final one included."""
  from acme_launch.run import summary as summary_lib
  rows = (summary_lib.evaluation_rows(run['run_dir'])
          if run.get('run_dir') else [])
  curve = [[r['actor_steps'], r['episode_return']] for r in rows]
  if run.get('final_eval_return_mean') is not None:  # At the budget.
    curve.append([run['final_eval_actor_steps'], run['final_eval_return_mean']])
  return curve or None


def final_episodes(run: dict) -> Optional[List[float]]:
  """Every episode's return of a run's final evaluation (final_eval.json):
  a mean hides a run whose policy stands still from some starts."""
  if run.get('final_eval_returns') is not None or not run.get('run_dir'):
    return run.get('final_eval_returns')
  from acme_launch import layout
  final = layout.read_json(layout.final_eval_path(run['run_dir']))
  return final['returns'] if final else None


def late_evaluations(run: dict, steps: int) -> Optional[List[float]]:
  """(min, max, mean) of a run's periodic evaluations in the second half of
  its budget (from steps / 2 on; the final evaluation not among them): where
  the curve levels off, less noisy than the final evaluation alone."""
  curve = run.get('curve') or []
  if run.get('final_eval_return_mean') is not None:
    curve = curve[:-1]  # The final evaluation, at the budget.
  late = [value for at, value in curve if at >= steps / 2]
  if not late:
    return None
  return [min(late), max(late), statistics.fmean(late)]


def _final_return(summary: dict) -> Optional[float]:
  value = summary.get('final_eval_return_mean')
  return summary.get('last_eval_return') if value is None else value


def summarize_cell(config_name: str, task: str, steps: int,
                   runs: List[dict]) -> Dict:
  finals = [_final_return(r) for r in runs if _final_return(r) is not None]
  finished = [r for r in runs if r['exit_reason'] == 'budget_reached']
  mean = lambda xs: statistics.fmean(xs) if xs else None
  return {
      'config': config_name, 'env': task, 'steps': steps,
      'seeds': [r['seed'] for r in runs],
      'final_returns': finals,
      'final_return_mean': mean(finals),
      'final_return_std': statistics.pstdev(finals) if finals else None,
      # IQM, median, mean over seeds, each with its 95% bootstrap interval
      # (none with one seed).
      'final_return_intervals': (stats.interval_estimates(finals)
                                 if finals else None),
      'wall_time_minutes': mean([r['wall_time_seconds'] / 60 for r in finished]),
      'env_steps_per_second': mean([r['env_steps_per_second'] for r in finished]),
      # A learner step is one SGD step for the off-policy agents as shipped
      # (num_sgd_steps_per_step 1); for PPO, epochs x minibatches of them.
      'learner_steps_per_second': mean(
          [r['learner_steps'] / r['wall_time_seconds'] for r in finished
           if r.get('learner_steps') and r.get('wall_time_seconds')]),
      # Run directories are this machine's paths: the curve is kept instead.
      'runs': [{k: r.get(k) for k in ('seed', 'exit_reason',
                                      'actor_steps', 'wall_time_seconds',
                                      'env_steps_per_second', 'learner_steps',
                                      'final_eval_return_mean',
                                      'final_eval_return_std',
                                      'final_eval_actor_steps',
                                      'last_eval_return')} | {
                                          'curve': r.get('curve') or
                                                   evaluation_curve(r),
                                          'final_eval_returns':
                                              final_episodes(r)}
               for r in runs],
  }


def plot_task(task: str, cells: List[Dict], path: str) -> None:
  """Each config's mean evaluation curve over its seeds, min-max shaded."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  import numpy as np
  figure, axes = plt.subplots(figsize=(7, 4))
  for cell in cells:
    curves = [run['curve'] for run in cell['runs'] if run.get('curve')]
    if not curves:
      continue
    # Seeds evaluate at slightly different steps: put them on one grid.
    curves = [np.asarray(c, float).T for c in curves]
    grid = np.linspace(0, max(s.max() for s, _ in curves), 50)
    values = np.array([np.interp(grid, s, r) for s, r in curves])
    axes.plot(grid, values.mean(axis=0),
              label=f'{cell["config"]} ({len(curves)} '
              f'seed{"s" if len(curves) > 1 else ""})')
    axes.fill_between(grid, values.min(axis=0), values.max(axis=0), alpha=0.2)
  axes.set_xlabel('actor steps')
  axes.set_ylabel('evaluation return')
  axes.set_title(task)
  axes.grid(alpha=0.3)
  axes.legend()
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def report(cells: List[Dict], launch_flags: List[str], out: str,
           name: str) -> None:
  """Writes OUT/NAME.json and the plots, and prints the table."""
  os.makedirs(out, exist_ok=True)
  plots = {}
  for task in dict.fromkeys(cell['env'] for cell in cells):
    plots[task] = os.path.join(out, f'{name}_{task.replace(":", "_")}.png')
    plot_task(task, [c for c in cells if c['env'] == task], plots[task])
  with open(os.path.join(out, f'{name}.json'), 'w') as f:
    json.dump({'launch_flags': launch_flags, 'cores': os.cpu_count(),
               'cells': cells, 'plots': plots}, f, indent=1)
  print(f'\n{os.cpu_count()} cores; launch flags: '
        f'{" ".join(launch_flags) or "(config defaults)"}')
  print(f'{"config":<14} {"task":<22} {"steps":>10} {"seeds":>5} '
        f'{"final return (mean +- std)":>27} {"wall time":>10} {"env steps/s":>12} '
        f'{"learner steps/s":>16}')
  for cell in cells:
    # One decimal for small returns (MinAtar's), none for MuJoCo's thousands.
    spec = ',.0f' if abs(cell['final_return_mean'] or 0) >= 1000 else '.1f'
    final = (f'{number(cell["final_return_mean"], spec, "-")} +- '
             f'{number(cell["final_return_std"], spec, "-")}')
    print(f'{cell["config"]:<14} {cell["env"]:<22} {cell["steps"]:>10,} '
          f'{len(cell["final_returns"]):>5} {final:>27} '
          f'{number(cell["wall_time_minutes"], ".1f", "-"):>8} m '
          f'{number(cell["env_steps_per_second"], missing="-"):>12} '
          f'{number(cell["learner_steps_per_second"], ",.1f", "-"):>16}')
  print(f'\n{"config":<14} {"task":<22} {"seeds":>5}  final return IQM, '
        'median, mean over seeds [95% bootstrap interval]')
  for cell in cells:
    intervals = cell.get('final_return_intervals')
    spec = ',.0f' if abs(cell['final_return_mean'] or 0) >= 1000 else '.1f'
    figure = (stats.estimates_text(intervals, spec) if intervals else '-')
    print(f'{cell["config"]:<14} {cell["env"]:<22} '
          f'{len(cell["final_returns"]):>5}  {figure}')
  if any(len(cell['final_returns']) == 1 for cell in cells):
    print('one seed in a cell: no interval can be given for it')
  for task in dict.fromkeys(cell['env'] for cell in cells):
    # Configs on one task: is one better? P(A > B) over their seeds.
    ran = [c for c in cells if c['env'] == task and c['final_returns']]
    for a, b in itertools.combinations(ran, 2):
      value, low, high = stats.probability_of_improvement(
          a['final_returns'], b['final_returns'])
      interval = (f' [{low:.2f}, {high:.2f}]' if min(
          len(a['final_returns']), len(b['final_returns'])) > 1 else '')
      print(f'{task}: P({a["config"]} > {b["config"]}) = {value:.2f}'
            f'{interval} (a run of the first ending above one of the second)')
  print('each run: final evaluation (its episodes\' mean +- std); the '
        'evaluations from half the budget on (min to max, mean)')
  for cell in cells:
    for run in cell['runs']:
      final = '-'
      if run.get('final_eval_return_mean') is not None:
        final = (f'{run["final_eval_return_mean"]:.1f} +- '
                 f'{run.get("final_eval_return_std") or 0:.1f}')
      late = late_evaluations(run, cell['steps'])
      window = (f'{late[0]:.1f} to {late[1]:.1f}, mean {late[2]:.1f}'
                if late else '-')
      episodes = run.get('final_eval_returns')
      shape = ''
      if episodes:
        e = spread.episode_spread(episodes)
        shape = (f' (episodes {e["min"]:.1f} to {e["max"]:.1f}, median '
                 f'{e["median"]:.1f}{"; " + e["split_sentence"] if e["split_sentence"] else ""})')
      print(f'  {cell["config"]} {cell["env"]} seed {run["seed"]}: '
            f'{final}{shape}; {window}')
  for task, path in plots.items():
    print(f'curves {task}: {path}')


def merge(paths: List[str]):
  """The cells of earlier matrices' JSON files, same (config, task, steps)
  pooled; their launch flags, which must agree."""
  cells: Dict[tuple, List[dict]] = {}
  flags = None
  for path in paths:
    try:
      with open(path) as f:
        matrix = json.load(f)
    except (OSError, ValueError) as e:
      _fail(f'--merge: cannot read {path}: {e}')
    if flags is not None and matrix['launch_flags'] != flags:
      _fail(f'--merge: {path} ran with launch flags {matrix["launch_flags"]}, '
            f'the others with {flags}')
    flags = matrix['launch_flags']
    for cell in matrix['cells']:
      runs = cells.setdefault((cell['config'], cell['env'], cell['steps']), [])
      seeds = {r['seed'] for r in cell['runs']}
      runs[:] = [r for r in runs if r['seed'] not in seeds] + cell['runs']
  merged = [summarize_cell(config_name, task, steps,
                           sorted(runs, key=lambda r: r['seed']))
            for (config_name, task, steps), runs in cells.items()]
  return merged, flags or []


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--configs', default='ppo_mujoco',
                      help='comma-separated registry configs')
  parser.add_argument('--envs', default='',
                      help="comma-separated tasks (default: each config's own)")
  parser.add_argument('--seeds', default='0',
                      help='comma-separated config seeds, one run each')
  parser.add_argument('--steps', type=int, default=0,
                      help="actor steps per run (default: each config's budget)")
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  parser.add_argument('--name', default='learning',
                      help='the matrix: its runs, table and plots are named so')
  parser.add_argument('--merge', default='',
                      help='comma-separated NAME.json files of earlier '
                      'matrices: pool their runs into one table and plots '
                      '(named --name), running nothing')
  args, launch_flags = parser.parse_known_args(argv)
  launch_flags = [f for f in launch_flags if f != '--']
  if args.merge:
    cells, flags = merge([p for p in args.merge.split(',') if p])
    report(cells, flags, args.out, args.name)
    return 0
  try:
    seeds = [int(s) for s in args.seeds.split(',')]
  except ValueError:
    _fail(f'--seeds must be comma-separated integers, got {args.seeds!r}')
  if args.steps < 0:
    _fail(f'--steps must be positive, got {args.steps}')

  # Every config and task is checked before anything runs.
  plan = []
  for config_name in [c for c in args.configs.split(',') if c]:
    config = _load_config(config_name)
    tasks = [t for t in args.envs.split(',') if t] or [config.env_name]
    for task in tasks:
      _check_task(config, task)
      plan.append((config_name, task, args.steps or config.max_actor_steps))

  workdir = os.path.join(args.out, args.name)
  cells = []
  for config_name, task, steps in plan:
    runs = [run_seed(config_name, task, seed, steps, workdir, launch_flags)
            for seed in seeds]
    cells.append(summarize_cell(config_name, task, steps, runs))
  report(cells, launch_flags, args.out, args.name)
  finished = all(r['exit_reason'] == 'budget_reached'
                 for c in cells for r in c['runs'])
  return 0 if finished else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
