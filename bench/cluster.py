"""Ray mode's overhead: the same program on local_mp and on a Ray cluster.

    sudo .venv/bin/python bench/cluster.py [--actors=2] [--envs_per_actor=16]
        [--seconds=40] [--out=bench/out]

(tests/test_bench.py runs it tiny: --seconds=5 --steps=8000 --warmup=0 ...)

In one invocation on this machine, bench/throughput.py's acme-launch program
(ppo_mujoco with its light PPO settings, no evaluator) runs twice with the
same nodes, so the same process count:
  1. under local_mp, every node unpinned (a Ray run pins no cores);
  2. under --launch_type=ray on a three-host cluster of network namespaces
     (tests/netns_cluster.py: own address per host, Ray's own CLI, token
     authentication), the launcher on host a with the learner, replay and
     counter, the actors alternately on hosts b and c.
Env steps/s come from the counter's totals after the first actor steps plus
--warmup (throughput.steady_rate). The namespaces share this machine's cores,
so the ratio is what Ray mode costs (its actors, raylets and GCS, and
traffic over the bridge instead of loopback), not what more hosts give.
Needs root (network namespaces): otherwise one line, exit 2. The figures are
also written to OUT/cluster.json.
"""

import argparse
import copy
import json
import os
import shutil
import sys
from typing import List

import throughput  # bench/throughput.py: the same program and rate.
from throughput import REPO_ROOT

from acme_launch import resources  # pylint: disable=g-import-not-at-top
from tests import netns_cluster  # pylint: disable=g-import-not-at-top

UNPINNED = tuple(f'--config.resources.{group}.cpus=all'
                 for group in resources.GROUPS)
RAY_STARTUP_EXTRA = 30.0  # Placing actors and checking hosts, in seconds.


def _fmt(rate) -> str:
  return 'failed' if rate is None else f'{rate:,.0f}'


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
  throughput.add_program_arguments(parser)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
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

  local = throughput.run_acme_launch(
      workdir, args.actors, args.envs_per_actor, args.backend, args, UNPINNED,
      run_name='local_mp')
  print(f'local_mp: {_fmt(local)} env steps/s', flush=True)

  cluster = netns_cluster.NetnsCluster(['a', 'b', 'c'],
                                       {'a': 4, 'b': 4, 'c': 4})
  ray_args = copy.copy(args)
  ray_args.startup_allowance = args.startup_allowance + RAY_STARTUP_EXTRA
  try:
    cluster.up()
    ray = throughput.run_acme_launch(
        workdir, args.actors, args.envs_per_actor, args.backend, ray_args,
        tuple(ray_placement(cluster, args.actors)), run_name='ray',
        prefix=tuple(cluster.in_host('a', [])), env=cluster.env)
  finally:
    cluster.down()
  ratio = ray / local if ray and local else None
  print(f'ray (3 namespace hosts): {_fmt(ray)} env steps/s'
        f'\n\n{"local_mp":>10} {"ray":>10} {"ray/local_mp":>13}\n'
        f'{_fmt(local):>10} {_fmt(ray):>10} '
        f'{(f"{ratio:.2f}" if ratio else "-"):>13}')
  with open(os.path.join(args.out, 'cluster.json'), 'w') as f:
    json.dump({'cores': os.cpu_count(), 'seconds': args.seconds,
               'actors': args.actors, 'envs_per_actor': args.envs_per_actor,
               'backend': args.backend,
               'local_mp_env_steps_per_second': local,
               'ray_env_steps_per_second': ray,
               'ray_over_local_mp': ratio}, f, indent=1)
  return 0 if local and ray else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
