"""What the run key's proof costs a run: the same program on the same
three-host cluster with the key (the default) and with --run_key=off, side
by side.

    sudo .venv/bin/python bench/run_key.py [--configs=ppo_mujoco,dqn_atari]
        [--rounds=3] [--seconds=40] [--out=bench/out]

(tests/e2e/test_bench_cluster.py runs it tiny: --configs=ppo_mujoco
--rounds=1 --seconds=5 --steps=24000 ...)

The cluster is bench/cluster.py's (tests/netns_cluster.py's network
namespaces, Ray's own CLI, token authentication): learner, replay and
counter on host a, the actors alternately on hosts b and c, so every
actor's inserts, variable fetches and counts cross hosts, each connection
proving the key (the shim's handshake, acme_launch/run/native/) or not.
For each config, --rounds rounds, each one run with the key and one with
--run_key=off, in alternating order (key first in odd rounds), so that
neither always goes second. Env steps/s come from the counter's totals
from the learner's first step plus --warmup to the program's end
(`rate_while_learning`): start-up, and the wait for the learner's first
step (its compilation, which moves by seconds with the machine's load),
are left out of both arms. Per config it prints each round's pair, the median of each arm, and the median
over rounds of key/off - 1 (a round's pair ran back to back, so load that
comes and goes touches both): the proof's cost to the run, which should be
within the noise (it is paid once per connection, and a run's connections
are few and long-lived). Needs root (network namespaces): otherwise one
line, exit 2. The figures are also written to OUT/run_key.json.

The programs: ppo_mujoco with bench/throughput.py's light PPO settings;
dqn_atari with its shipped network, envs and epsilons, a replay of 10,000
transitions filled from 2,000 and 0.1 samples per insert, so that the
actors (not the CPU-bound learner) set the pace. No evaluator in either.
"""

import argparse
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

import cluster as cluster_bench  # bench/cluster.py: placement, start-up.
import throughput  # bench/throughput.py: the PPO program and the rate.

from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

CONFIGS = ('ppo_mujoco', 'dqn_atari')
ARMS = ('key', 'off')
ARM_FLAGS = {'key': (), 'off': ('--run_key=off',)}
DQN_FLAGS = ('--config.dqn.min_replay_size=2000',
             '--config.dqn.max_replay_size=10000',
             '--config.dqn.samples_per_insert=0.1')


def rate_while_learning(progress_csv: str, warmup: float) -> Optional[float]:
  """Actor env steps/s from the counter's totals, from the first row with
  a learner step plus `warmup` seconds to the last row; None without two
  such rows a second apart."""
  if not os.path.isfile(progress_csv):
    return None
  with open(progress_csv, newline='') as f:
    rows = [(float(r['wall_time']), float(r['actor_steps']),
             float(r['learner_steps'])) for r in csv.DictReader(f)]
  learning = [t for t, _, learner in rows if learner > 0]
  if not learning:
    return None
  window = [(t, a) for t, a, _ in rows if t >= learning[0] + warmup]
  if len(window) < 2 or window[-1][0] - window[0][0] < 1:
    return None
  return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def _run_dqn(workdir: str, actors: int, args: argparse.Namespace,
             flags: Sequence[str], run_name: str, prefix: Sequence[str],
             env: Dict[str, str]) -> None:
  """Runs dqn_atari (see the module docstring)."""
  command = [*prefix, *launch_command('--config=dqn_atari'),
             f'--workdir={workdir}', f'--run_name={run_name}',
             f'--config.num_actors={actors}', '--config.num_evaluators=0',
             f'--max_wall_time={args.seconds + args.startup_allowance}',
             f'--config.max_actor_steps={args.steps}', '--progress_every=1000',
             *DQN_FLAGS, *flags]
  result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                          text=True, check=False, env=env)
  if result.returncode != 0:
    print(f'{run_name}: launch exit {result.returncode}; its output ends:\n'
          f'{result.stdout[-1500:]}{result.stderr[-1500:]}', file=sys.stderr)


def measure(cluster: netns_cluster.NetnsCluster, config: str, arm: str,
            round_index: int, workdir: str,
            args: argparse.Namespace) -> Optional[float]:
  """One program's env steps/s on the cluster, with or without the key."""
  flags = (*cluster_bench.ray_placement(cluster, args.actors),
           *ARM_FLAGS[arm])
  run_name = f'{config}_{arm}_{round_index}'
  prefix = tuple(cluster.in_host('a', []))
  if config == 'ppo_mujoco':
    throughput.run_acme_launch(
        workdir, args.actors, args.envs_per_actor, args.backend, args, flags,
        run_name=run_name, prefix=prefix, env=cluster.env)
  else:
    _run_dqn(workdir, args.actors, args, flags, run_name, prefix, cluster.env)
  rate = rate_while_learning(
      os.path.join(workdir, run_name, 'metrics', 'progress.csv'), args.warmup)
  if rate is None:
    print(f'{run_name}: no rate while learning (no two counter rows a second '
          'apart after its first learner step and the warm-up)',
          file=sys.stderr)
  return rate


def cost(key: Sequence[Optional[float]],
         off: Sequence[Optional[float]]) -> Optional[float]:
  """The median over rounds of key/off - 1; None if a round has no rate."""
  if not key or None in key or None in off:
    return None
  return statistics.median(k / o - 1 for k, o in zip(key, off))


def _median(rates: Sequence[Optional[float]]) -> Optional[float]:
  return statistics.median(rates) if rates and None not in rates else None


def _print_config(config: str, rates: Dict[str, List[Optional[float]]],
                  change: Optional[float]) -> None:
  print(f'\n{config}: env steps/s')
  print(f'{"":>10} {"key":>10} {"off":>10} {"key/off-1":>10}')
  for i, (k, o) in enumerate(zip(rates['key'], rates['off'])):
    one = f'{k / o - 1:+.1%}' if k and o else '-'
    print(f'{f"round {i + 1}":>10} {number(k):>10} {number(o):>10} {one:>10}')
  print(f'{"median":>10} {number(_median(rates["key"])):>10} '
        f'{number(_median(rates["off"])):>10} '
        f'{(f"{change:+.1%}" if change is not None else "-"):>10}')


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--configs', default=','.join(CONFIGS),
                      help=f'comma-separated, of {", ".join(CONFIGS)}')
  parser.add_argument('--actors', type=int, default=2)
  parser.add_argument('--envs_per_actor', type=int, default=16,
                      help='ppo_mujoco only (dqn_atari keeps its 8)')
  parser.add_argument('--backend', default='gym', help='ppo_mujoco only')
  parser.add_argument('--rounds', type=int, default=3)
  throughput.add_program_arguments(parser)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
  configs = [c.strip() for c in args.configs.split(',') if c.strip()]
  unknown = [c for c in configs if c not in CONFIGS]
  if unknown or not configs or args.rounds < 1:
    why = (f'--configs: {", ".join(unknown)} not one of {", ".join(CONFIGS)}'
           if unknown or not configs else
           f'--rounds must be at least 1, not {args.rounds}')
    print(f'bench/run_key.py: error: {why}', file=sys.stderr)
    return 2
  why_not = netns_cluster.why_not_available()
  if why_not:
    print(f'bench/run_key.py: error: no network namespaces here ({why_not}); '
          'the cluster needs them', file=sys.stderr)
    return 2
  workdir = os.path.join(args.out, 'run_key')
  shutil.rmtree(workdir, ignore_errors=True)
  os.makedirs(workdir)
  args.startup_allowance += cluster_bench.RAY_STARTUP_EXTRA
  print(f'machine: {os.cpu_count()} cores; {args.actors} actor(s) on hosts b '
        f'and c, {args.seconds:.0f} s per program, {args.rounds} round(s)',
        flush=True)
  cluster = netns_cluster.NetnsCluster(['a', 'b', 'c'],
                                       {'a': 4, 'b': 4, 'c': 4})
  # A SIGTERM ends the bench through `finally`: the cluster taken down.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  rates = {c: {arm: [] for arm in ARMS} for c in configs}
  try:
    cluster.up()
    for round_index in range(args.rounds):
      order = ARMS if round_index % 2 == 0 else ARMS[::-1]
      for config in configs:
        for arm in order:
          rate = measure(cluster, config, arm, round_index, workdir, args)
          rates[config][arm].append(rate)
          print(f'round {round_index + 1} {config} {arm}: {number(rate)} env '
                'steps/s', flush=True)
  finally:
    cluster.down()
  results = {'cores': os.cpu_count(), 'seconds': args.seconds,
             'rounds': args.rounds, 'actors': args.actors, 'configs': {}}
  for config in configs:
    change = cost(rates[config]['key'], rates[config]['off'])
    _print_config(config, rates[config], change)
    results['configs'][config] = {
        'key_rounds': rates[config]['key'], 'off_rounds': rates[config]['off'],
        'key_median': _median(rates[config]['key']),
        'off_median': _median(rates[config]['off']),
        'median_key_over_off_minus_1': change}
  with open(os.path.join(args.out, 'run_key.json'), 'w') as f:
    json.dump(results, f, indent=1)
  return 0 if all(r['median_key_over_off_minus_1'] is not None
                  for r in results['configs'].values()) else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
