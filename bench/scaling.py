"""Scaling on one host: actor processes, pinned and not, and sweeps packed.

    .venv/bin/python bench/scaling.py [--actors=1,2,4,8,13] [--seconds=30]
        [--envs_per_actor=16] [--backend=gym] [--sweep_points=4]
        [--out=bench/out]

(tests/e2e/test_bench.py runs it tiny: --actors=1 --seconds=5 --sweep_points=1 ...)

Everything runs in this one invocation on this machine:
  1. for each actor count (default 1, 2, 4, ... up to the cores minus the
     learner's, replay's and counter's): stock Acme's DistributedPPO with
     that many actors, and `launch.py --config=ppo_mujoco` with that many
     batched actors (--envs_per_actor each), once with the automatic CPU
     plan (pinned where the host has a core for each of the learner, the
     replay and every actor) and once with every node unpinned
     (`--config.resources.GROUP.cpus=all`, the placement before pinning;
     where the automatic plan did not pin, that run is the unpinned one and
     is not repeated);
     env steps/s as bench/throughput.py measures it (the counter's totals
     after start-up and a warm-up), and the efficiency against one actor:
     rate(n) / (n * rate(1));
  2. a sweep of --sweep_points seeds of the small `smoke` config to
     --sweep_steps, once one program at a time (--max_concurrent=1) and once
     packed (--max_concurrent=N, default min(points, cores); where that is
     1, the serial sweep is the packed one and is not repeated): programs
     per hour, wall clock of the whole sweep.
The figures are also written to OUT/scaling.json. Run it on an otherwise
idle machine; on a small one the pinned plan falls back to unpinned and says
so in the table (`pinned` column).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional

import throughput  # bench/throughput.py: the same programs and rate.

from acme_launch.plan import resources
from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

UNPINNED = tuple(f'--config.resources.{group}.cpus=all'
                 for group in resources.GROUPS)


def small_host_pinning(actors: int, cores: List[int]) -> Optional[tuple]:
  """Flags for a host too small for the automatic plan: each actor a core
  of its own, every other node on the first core. None if even that does
  not fit."""
  if len(cores) < actors + 1:
    return None
  first = f'{cores[0]}-{cores[0]}'
  overrides = ';'.join(f'actor/{i}:cpus={c}-{c}'
                       for i, c in enumerate(cores[1:actors + 1]))
  return tuple(f'--config.resources.{group}.cpus={first}'
               for group in resources.GROUPS if group != 'actor') + (
                   f'--config.resources.node_overrides={overrides}',
                   '--config.resources.oversubscribe_cpus=true')


def default_actor_counts(cores: int) -> List[int]:
  """1, 2, 4, ... and the most actors that leave the learner, replay and
  counter a core each."""
  most = max(1, cores - 3)
  counts = [1]
  while counts[-1] * 2 < most:
    counts.append(counts[-1] * 2)
  return sorted(set(counts + [most]))


def pinned_in(run_dir: str) -> Optional[bool]:
  """Whether the run's actors were pinned (its recorded plan), None if no
  plan was written."""
  try:
    with open(os.path.join(run_dir, 'config.json')) as f:
      plan = json.load(f)['resource_plan']
  except (OSError, ValueError, KeyError):
    return None
  return all(p['cores'] for p in plan if p['group'] == 'actor')


def run_sweep(workdir: str, name: str, points: int, concurrent: int,
              steps: int) -> Optional[float]:
  """Wall seconds for a sweep of `points` seeds of `smoke`; None if it
  failed."""
  seeds = ','.join(str(s) for s in range(points))
  started = time.time()
  result = subprocess.run(
      launch_command('--config=smoke', f'--sweep=seed={seeds}',
                     f'--max_concurrent={concurrent}',
                     f'--config.max_actor_steps={steps}', f'--workdir={workdir}',
                     f'--run_name={name}', '--progress_every=30'),
      cwd=REPO_ROOT, capture_output=True, text=True, check=False)
  seconds = time.time() - started
  if result.returncode != 0:
    print(f'sweep {name}: exit {result.returncode}; its output ends:\n'
          f'{result.stdout[-1500:]}{result.stderr[-1500:]}', file=sys.stderr)
    return None
  return seconds


def _efficiency(rates: Dict[int, Optional[float]], n: int) -> str:
  one, rate = rates.get(1), rates.get(n)
  return f'{100 * rate / (n * one):.0f}%' if one and rate else '-'


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--actors', default='',
                      help='actor counts, comma-separated (default: 1, 2, '
                      '4, ... up to the cores minus 3)')
  parser.add_argument('--envs_per_actor', type=int, default=16)
  parser.add_argument('--backend', default='gym', choices=('gym', 'envpool'))
  parser.add_argument('--seconds', type=float, default=30.0,
                      help='measured seconds per program')
  parser.add_argument('--warmup', type=float, default=5.0)
  parser.add_argument('--startup_allowance', type=float, default=60.0)
  parser.add_argument('--steps', type=int, default=100_000_000)
  parser.add_argument('--sweep_points', type=int, default=4,
                      help='seeds in the sweep figure (0: no sweep figure)')
  parser.add_argument('--sweep_concurrent', type=int, default=0,
                      help='programs at once in the packed sweep (default '
                      'min(points, cores))')
  parser.add_argument('--sweep_steps', type=int, default=5000)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
  cores = len(os.sched_getaffinity(0))
  counts = ([int(a) for a in args.actors.split(',')] if args.actors
            else default_actor_counts(cores))
  workdir = os.path.join(args.out, 'scaling')
  shutil.rmtree(workdir, ignore_errors=True)
  os.makedirs(workdir)
  print(f'machine: {cores} cores; {args.seconds:.0f} s per program; '
        f'{args.envs_per_actor} {args.backend} envs per acme-launch actor')

  stock: Dict[int, Optional[float]] = {}
  pinned: Dict[int, Optional[float]] = {}
  unpinned: Dict[int, Optional[float]] = {}
  was_pinned: Dict[int, Optional[bool]] = {}
  by_hand: Dict[int, Optional[float]] = {}
  for n in counts:
    stock[n] = throughput.run_stock_acme(workdir, n, args)
    name = f'pinned_a{n}'
    pinned[n] = throughput.run_acme_launch(
        workdir, n, args.envs_per_actor, args.backend, args, run_name=name)
    was_pinned[n] = pinned_in(os.path.join(workdir, name))
    if was_pinned[n] is False:
      # The automatic plan did not pin: it is the unpinned placement, so
      # running it again would only measure the noise.
      unpinned[n] = pinned[n]
    else:
      unpinned[n] = throughput.run_acme_launch(
          workdir, n, args.envs_per_actor, args.backend, args, UNPINNED,
          run_name=f'unpinned_a{n}')
    print(f'{n} actor(s): stock {number(stock[n])}, acme-launch automatic plan '
          f'{number(pinned[n])} (pinned: {was_pinned[n]}), unpinned '
          f'{number(unpinned[n])} env steps/s', flush=True)
    flags = small_host_pinning(n, sorted(os.sched_getaffinity(0)))
    if not was_pinned[n] and flags:
      by_hand[n] = throughput.run_acme_launch(
          workdir, n, args.envs_per_actor, args.backend, args, flags,
          run_name=f'small_host_a{n}')
      print(f'{n} actor(s): pinned for a small host (actors a core each, '
            f'the rest on one) {number(by_hand[n])} env steps/s', flush=True)

  print('\nenv steps/s; eff = rate / (actors x rate with 1 actor); x = ratio '
        'to stock Acme at the same actor count; auto/unpinned = the '
        'automatic plan against every node unpinned')
  print(f'{"actors":>6} {"stock":>8} {"eff":>5} {"auto":>8} {"pinned":>6} '
        f'{"eff":>5} {"x":>5} {"unpinned":>8} {"eff":>5} {"x":>5} '
        f'{"auto/unpinned":>13}')
  for n in counts:
    ratio = lambda a, b: f'{a / b:.2f}x' if a and b else '-'
    print(f'{n:>6} {number(stock[n]):>8} {_efficiency(stock, n):>5} '
          f'{number(pinned[n]):>8} {str(was_pinned[n]).lower():>6} '
          f'{_efficiency(pinned, n):>5} {ratio(pinned[n], stock[n]):>5} '
          f'{number(unpinned[n]):>8} {_efficiency(unpinned, n):>5} '
          f'{ratio(unpinned[n], stock[n]):>5} '
          f'{ratio(pinned[n], unpinned[n]):>13}')
  if by_hand:
    print('\nwhere the automatic plan could not pin: actors a core each, '
          'every other node on one core, against every node unpinned')
    for n, rate in by_hand.items():
      ratio = f'{rate / unpinned[n]:.2f}x' if rate and unpinned[n] else '-'
      print(f'{n:>6} actor(s): pinned {number(rate)}, unpinned '
            f'{number(unpinned[n])}: {ratio}')

  sweep = {}
  if args.sweep_points:
    concurrent = args.sweep_concurrent or min(args.sweep_points, cores)
    for label, at_once in (('serial', 1), ('packed', concurrent)):
      if label == 'packed' and at_once == 1:  # The same sweep: measured once.
        sweep[label] = dict(sweep['serial'])
        continue
      seconds = run_sweep(workdir, f'sweep_{label}', args.sweep_points,
                          at_once, args.sweep_steps)
      sweep[label] = {'concurrent': at_once, 'wall_seconds': seconds,
                      'programs_per_hour': (3600 * args.sweep_points / seconds
                                            if seconds else None)}
    print(f'\nsweep of {args.sweep_points} seeds of smoke to '
          f'{args.sweep_steps} actor steps each:')
    for label, row in sweep.items():
      print(f'  {label:>6}: {row["concurrent"]} at once, '
            f'{number(row["wall_seconds"], ".0f")} s, '
            f'{number(row["programs_per_hour"], ".0f")} programs/hour')
    serial, packed = sweep['serial']['wall_seconds'], sweep['packed']['wall_seconds']
    if serial and packed:
      print(f'  packed/serial programs per hour: {serial / packed:.2f}x')

  with open(os.path.join(args.out, 'scaling.json'), 'w') as f:
    json.dump({'cores': cores, 'seconds': args.seconds,
               'envs_per_actor': args.envs_per_actor, 'backend': args.backend,
               'actors': [{'actors': n, 'stock_acme': stock[n],
                           'auto': pinned[n], 'auto_pinned': was_pinned[n],
                           'unpinned': unpinned[n],
                           'small_host_pinned': by_hand.get(n)}
                          for n in counts],
               'sweep': sweep}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
