"""Ray mode's overhead: the same program on local_mp and on a Ray cluster.

    sudo .venv/bin/python bench/cluster.py [--actors=2] [--envs_per_actor=16]
        [--seconds=40] [--rounds=2] [--out=bench/out]

(tests/e2e/test_bench_cluster.py runs it tiny: --seconds=5 --steps=8000 --rounds=1 ...)

In one invocation on this machine, bench/throughput.py's acme-launch program
(ppo_mujoco with its light PPO settings, no evaluator) runs with the same
nodes, so the same process count:
  - under local_mp, every node unpinned (a Ray run pins no cores);
  - under --launch_type=ray on a three-host cluster of network namespaces
    (tests/netns_cluster.py: own address per host, Ray's own CLI, token
    authentication), the launcher on host a with the learner, replay and
    counter, the actors alternately on hosts b and c;
--rounds times each, in the order local_mp, ray, ray, local_mp, ... so that
neither always goes second (a machine that heats up, or load that comes
and goes, then favours neither). The cluster is up for every round, so its
idle daemons are there for both: the ratio is what running through Ray
costs (its actors, and traffic over the bridge instead of loopback). Env
steps/s come from the counter's totals after the first actor steps plus
--warmup (throughput.steady_rate); the ratio is the mean of the ray rounds
over the mean of the local_mp ones. The namespaces share this machine's
cores, so it shows Ray mode's overhead, not what more hosts give.
Needs root (network namespaces): otherwise one line, exit 2. The figures are
also written to OUT/cluster.json.
"""

import argparse
import copy
import json
import os
import shutil
import signal
import statistics
import sys
from typing import List

import throughput  # bench/throughput.py: the same program and rate.

from acme_launch.plan import resources
from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import REPO_ROOT
from acme_launch.testing.report import number

UNPINNED = tuple(f'--config.resources.{group}.cpus=all'
                 for group in resources.GROUPS)
RAY_STARTUP_EXTRA = 30.0  # Placing actors and checking hosts, in seconds.


def ray_placement(cluster: netns_cluster.NetnsCluster,
                  actors: int) -> List[str]:
  """Learner, replay, counter on host a; actors alternately on b and c."""
  flags = ['--launch_type=ray', f'--ray_address={cluster.address}']
  for group in ('replay', 'counter', 'learner'):
    flags += [f'--config.resources.{group}.ray_cpus=0.5',
              f'--config.resources.{group}.ray_resources=host_a:1']
  overrides = ';'.join(f'actor/{i}:ray_resources=host_{"bc"[i % 2]}:1'
                       for i in range(actors))
  return flags + ['--config.resources.actor.ray_cpus=0.5',
                  f'--config.resources.node_overrides={overrides}']


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--actors', type=int, default=2)
  parser.add_argument('--envs_per_actor', type=int, default=16)
  parser.add_argument('--backend', default='gym')
  parser.add_argument('--rounds', type=int, default=2,
                      help='runs of each launch type, alternating which goes first')
  throughput.add_program_arguments(parser)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
  if args.rounds < 1:
    print(f'bench/cluster.py: error: --rounds must be at least 1, not '
          f'{args.rounds}', file=sys.stderr)
    return 2
  why_not = netns_cluster.why_not_available()
  if why_not:
    print(f'bench/cluster.py: error: no network namespaces here ({why_not}); '
          'the Ray side needs them', file=sys.stderr)
    return 2
  workdir = os.path.join(args.out, 'cluster')
  shutil.rmtree(workdir, ignore_errors=True)
  os.makedirs(workdir)
  print(f'machine: {os.cpu_count()} cores; {args.actors} actor(s) x '
        f'{args.envs_per_actor} env(s), {args.seconds:.0f} s per program',
        flush=True)

  cluster = netns_cluster.NetnsCluster(['a', 'b', 'c'],
                                       {'a': 4, 'b': 4, 'c': 4})
  ray_args = copy.copy(args)
  ray_args.startup_allowance = args.startup_allowance + RAY_STARTUP_EXTRA
  rates = {'local_mp': [], 'ray': []}
  # A SIGTERM ends the bench through `finally`: the cluster taken down.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  try:
    cluster.up()
    for round_index in range(args.rounds):
      order = ('local_mp', 'ray') if round_index % 2 == 0 else ('ray', 'local_mp')
      for launch_type in order:
        run_name = f'{launch_type}_{round_index}'
        if launch_type == 'local_mp':
          rate = throughput.run_acme_launch(
              workdir, args.actors, args.envs_per_actor, args.backend, args,
              UNPINNED, run_name=run_name)
        else:
          rate = throughput.run_acme_launch(
              workdir, args.actors, args.envs_per_actor, args.backend,
              ray_args, tuple(ray_placement(cluster, args.actors)),
              run_name=run_name, prefix=tuple(cluster.in_host('a', [])),
              env=cluster.env)
        rates[launch_type].append(rate)
        print(f'round {round_index + 1} {launch_type}: {number(rate)} env '
              'steps/s', flush=True)
  finally:
    cluster.down()
  local, ray = (statistics.mean(r) if r and None not in r else None
                for r in (rates['local_mp'], rates['ray']))
  ratio = ray / local if ray and local else None
  print(f'\n{"":>12} {"local_mp":>10} {"ray (3 hosts)":>14} {"ray/local_mp":>13}')
  for i in range(args.rounds):
    one = (rates['ray'][i] / rates['local_mp'][i]
           if rates['ray'][i] and rates['local_mp'][i] else None)
    print(f'{f"round {i + 1}":>12} {number(rates["local_mp"][i]):>10} '
          f'{number(rates["ray"][i]):>14} {(f"{one:.2f}" if one else "-"):>13}')
  print(f'{"mean":>12} {number(local):>10} {number(ray):>14} '
        f'{(f"{ratio:.2f}" if ratio else "-"):>13}')
  with open(os.path.join(args.out, 'cluster.json'), 'w') as f:
    json.dump({'cores': os.cpu_count(), 'seconds': args.seconds,
               'actors': args.actors, 'envs_per_actor': args.envs_per_actor,
               'backend': args.backend, 'rounds': args.rounds,
               'local_mp_rounds': rates['local_mp'], 'ray_rounds': rates['ray'],
               'local_mp_env_steps_per_second': local,
               'ray_env_steps_per_second': ray,
               'ray_over_local_mp': ratio}, f, indent=1)
  return 0 if local and ray else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
