"""Population-based training and early stopping against random search.

    .venv/bin/python bench/population.py [--config=ppo_mujoco]
        [--space='ppo.learning_rate=loguniform(1e-5,1e-2);...']
        [--steps=300000] [--members=8] [--repetitions=3] [--interval=75000]
        [--asha_points=16] [--asha_grace=STEPS/9] [--asha_reduction=3]
        [--asha_seed=REPETITIONS] [--eval_every=GRACE]
        [--max_concurrent=2] [--pbt_max_concurrent=MAX_CONCURRENT]
        [--out=bench/out] [-- FLAG...]

(tests/e2e/test_bench.py runs it tiny, on tests/bandit_env.py.)

Everything runs in this one invocation, one sweep at a time, each through
`launch.py` as a user runs it, --max_concurrent programs at once (default:
two on a 2-core host; the members of a larger population take turns on
the slots, each frozen at a boundary until the comparison, unless
--pbt_max_concurrent asks for every member at once):
  1. --repetitions times (sweep seeds 0, 1, ...): random search of
     --members points over --space (`--sweep_samples`), then a population
     of the same --members draws (`--sweep_scheduler=pbt`, the same sweep
     seed, so the population starts from exactly the random search's
     points) compared every --interval actor steps; both to --steps per
     program, so both spend the same env steps;
  2. if --asha_points: random search of that many points (--asha_seed,
     default the next sweep seed), in full and under ASHA
     (`--sweep_scheduler=asha`, rungs from --asha_grace actor steps,
     --asha_reduction), the same points in both (the full search is
     repetition ASHA_SEED's random search, not run again, when it drew the
     same points: --asha_points equal to --members).
For each sweep: the best final return (a program's final evaluation), the
IQM of the final returns, the actor steps of all its programs together, and
the wall time from launch to the sweep's table, the most memory the host
gave it; then the comparisons the goals ask for: the population's best
against random search's in each repetition, its wall time over random
search's (the same programs, plus the population's waits and copies), and
ASHA's best and steps against
the full search's. Flags after `--` go to every sweep. The figures are also
written to OUT/population.json, the sweep directories under OUT/population/.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from acme_launch.stats import metrics
from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

SPACE = ('ppo.learning_rate=loguniform(1e-5,1e-2);'
         'ppo.ppo_clipping_epsilon=uniform(0.1,0.4)')


def _available_bytes() -> int:
  with open('/proc/meminfo') as f:
    for line in f:
      if line.startswith('MemAvailable:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError('no MemAvailable in /proc/meminfo')


class _MemoryWatch:
  """The most memory taken while a sweep runs: the host's MemAvailable
  before it, less its lowest during it, read every second."""

  def __init__(self):
    self._before = self._lowest = _available_bytes()
    self._done = threading.Event()
    self._thread = threading.Thread(target=self._watch, daemon=True)
    self._thread.start()

  def _watch(self) -> None:
    while not self._done.wait(1.0):
      self._lowest = min(self._lowest, _available_bytes())

  def stop(self) -> float:
    """The peak, in GiB."""
    self._done.set()
    self._thread.join()
    return (self._before - self._lowest) / 2**30


def run_sweep(out: str, name: str, flags: List[str]) -> Dict[str, Any]:
  """One sweep through launch.py: its figures from sweep_summary.json."""
  sweep_dir = os.path.join(out, name)
  shutil.rmtree(sweep_dir, ignore_errors=True)
  started = time.time()
  memory = _MemoryWatch()
  result = subprocess.run(
      launch_command(*flags, f'--workdir={out}', f'--run_name={name}'),
      cwd=REPO_ROOT, capture_output=True, text=True, check=False)
  seconds = time.time() - started
  row: Dict[str, Any] = {'sweep': name,
                         'exit_code': result.returncode,
                         'wall_seconds': round(seconds, 1),
                         'memory_peak_gib': round(memory.stop(), 2)}
  try:
    with open(os.path.join(sweep_dir, 'sweep_summary.json')) as f:
      table = json.load(f)
  except (OSError, json.JSONDecodeError):
    table = None
  if result.returncode != 0 or table is None:
    print(f'sweep {name}: exit {result.returncode}; its output ends:\n'
          f'{result.stdout[-1500:]}{result.stderr[-1500:]}', file=sys.stderr)
    row['failed'] = True
    if table is None:
      return row
  points = table['points']
  finals = [p['final_return'] for p in points
            if p['final_return'] is not None]
  best = max(points, key=lambda p: (p['final_return'] is not None,
                                    p['final_return'] or 0.0))
  row.update({
      'programs': len(points),
      'finals': finals,
      'best_return': best['final_return'],
      'best_point': best['point'],
      'iqm': float(metrics.iqm(finals)) if finals else None,
      'actor_steps': sum(p['actor_steps'] or 0 for p in points),
      'stopped_early': sum(bool(p.get('stopped_early')) for p in points),
      'launches': sum(p['launches'] for p in points),
  })
  if 'population' in table:
    row['exploits'] = table['population']['exploits']
  return row


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
  return a / b if a is not None and b else None


def compare(results: Dict[str, Any]) -> Dict[str, Any]:
  """The goals' comparisons from the sweeps' rows."""
  found: Dict[str, Any] = {'repetitions': []}
  for random, pbt in results['repetitions']:
    found['repetitions'].append({
        'pbt_best_at_least_random_best': (
            None if pbt.get('best_return') is None or
            random.get('best_return') is None else
            pbt['best_return'] >= random['best_return']),
        'pbt_wall_over_random': _ratio(pbt['wall_seconds'],
                                       random['wall_seconds'])})
  asha = results.get('asha')
  if asha:
    full, early = asha
    found['asha'] = {
        'best_of_full': _ratio(early.get('best_return'),
                               full.get('best_return')),
        'steps_of_full': _ratio(early.get('actor_steps'),
                                full.get('actor_steps'))}
  return found


def _pct(value: Optional[float]) -> str:
  return '-' if value is None else f'{100 * value:.0f}%'


def print_table(results: Dict[str, Any]) -> None:
  print('| sweep | programs | launches | best final return | IQM of final '
        'returns | actor steps, all programs | stopped early | exploits | '
        'wall time | memory at peak |')
  print('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
  rows = [row for pair in results['repetitions'] for row in pair]
  rows += list(results.get('asha') or ())
  for row in rows:
    print(f'| {row["sweep"]} | {row.get("programs", "-")} | '
          f'{row.get("launches", "-")} | {number(row.get("best_return"))} | '
          f'{number(row.get("iqm"))} | {number(row.get("actor_steps"))} | '
          f'{row.get("stopped_early", "-")} | {row.get("exploits", "-")} | '
          f'{number(row.get("wall_seconds"), ",.0f")} s | '
          f'{number(row.get("memory_peak_gib"), ".1f")} GiB |')
  found = results['comparison']
  for i, rep in enumerate(found['repetitions']):
    print(f'repetition {i}: the population\'s best at or above random '
          f'search\'s best: {rep["pbt_best_at_least_random_best"]}; its '
          f'wall time {_pct(rep["pbt_wall_over_random"])} of random '
          f'search\'s')
  if 'asha' in found:
    print(f'ASHA: its best {_pct(found["asha"]["best_of_full"])} of the full '
          f'search\'s, with {_pct(found["asha"]["steps_of_full"])} of its '
          f'actor steps')


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--config', default='ppo_mujoco')
  parser.add_argument('--space', default=SPACE,
                      help='the --sweep of every search (ranges)')
  parser.add_argument('--steps', type=int, default=300_000,
                      help='actor steps per program')
  parser.add_argument('--members', type=int, default=8)
  parser.add_argument('--repetitions', type=int, default=3)
  parser.add_argument('--interval', type=int, default=75_000,
                      help='--pbt_interval_steps')
  parser.add_argument('--asha_points', type=int, default=16,
                      help='0: no ASHA comparison')
  parser.add_argument('--asha_grace', type=int, default=None,
                      help='--asha_grace_steps (default: --steps / 9, so '
                      'rungs at 1/9 and 1/3 of the budget)')
  parser.add_argument('--asha_reduction', type=int, default=3,
                      help='--asha_reduction')
  parser.add_argument('--asha_seed', type=int, default=None,
                      help='the --sweep_seed of its points (default: '
                      '--repetitions, the seed after the populations\')')
  parser.add_argument('--eval_every', type=int, default=None,
                      help='--config.eval_every_steps of every sweep '
                      '(default: --asha_grace, so the first rung has an '
                      'evaluation)')
  parser.add_argument('--max_concurrent', type=int,
                      default=min(2, len(os.sched_getaffinity(0))))
  parser.add_argument('--pbt_max_concurrent', type=int, default=None,
                      help='the population\'s --max_concurrent (default: '
                      '--max_concurrent; --members: every member at once, '
                      'sharing the cores)')
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  parser.add_argument('extra', nargs='*', help='flags for every sweep')
  args = parser.parse_args(argv)

  grace = args.asha_grace or args.steps // 9
  out = os.path.abspath(os.path.join(args.out, 'population'))
  os.makedirs(out, exist_ok=True)
  common = [f'--config={args.config}', f'--sweep={args.space}',
            f'--config.max_actor_steps={args.steps}',
            f'--config.eval_every_steps={args.eval_every or grace}',
            *args.extra]
  searches = common + [f'--max_concurrent={args.max_concurrent}']
  pbt_at_once = (args.max_concurrent if args.pbt_max_concurrent is None
                 else args.pbt_max_concurrent)
  results: Dict[str, Any] = {'argv': argv, 'common_flags': common,
                             'repetitions': []}
  for rep in range(args.repetitions):
    draws = [f'--sweep_samples={args.members}', f'--sweep_seed={rep}']
    random = run_sweep(out, f'random{args.members}_seed{rep}',
                       searches + draws)
    pbt = run_sweep(out, f'pbt{args.members}_seed{rep}',
                    common + draws + ['--sweep_scheduler=pbt',
                                      f'--pbt_interval_steps={args.interval}',
                                      f'--max_concurrent={pbt_at_once}'])
    results['repetitions'].append([random, pbt])
    print(f'repetition {rep}: random search best '
          f'{number(random.get("best_return"))} in '
          f'{random["wall_seconds"]:.0f} s, population best '
          f'{number(pbt.get("best_return"))} in {pbt["wall_seconds"]:.0f} s',
          flush=True)
  if args.asha_points:
    seed = args.repetitions if args.asha_seed is None else args.asha_seed
    draws = [f'--sweep_samples={args.asha_points}', f'--sweep_seed={seed}']
    if args.asha_points == args.members and seed < args.repetitions:
      # The same points as repetition `seed`'s random search: that sweep.
      full = dict(results['repetitions'][seed][0])
    else:
      full = run_sweep(out, f'random{args.asha_points}', searches + draws)
    early = run_sweep(out, f'random{args.asha_points}_asha',
                      searches + draws + [
                          '--sweep_scheduler=asha',
                          f'--asha_grace_steps={grace}',
                          f'--asha_reduction={args.asha_reduction}'])
    results['asha'] = [full, early]
  results['comparison'] = compare(results)
  with open(os.path.join(args.out, 'population.json'), 'w') as f:
    json.dump(results, f, indent=1)
  print_table(results)
  failed = [row['sweep'] for pair in results['repetitions'] + [
      results.get('asha') or []] for row in pair if row.get('failed')]
  if failed:
    print(f'failed: {", ".join(failed)}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
