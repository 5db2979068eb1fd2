"""Soak benchmark: does any node's memory, or the run directory, keep growing?

    .venv/bin/python bench/soak.py [--config=ppo_mujoco] [--minutes=30] \
        [--every=5] [--settle_minutes=7] [--out=bench/out] [-- launch.py flags]

Runs one program for a fixed wall time (`--max_wall_time`, a step budget of
10^9 it does not reach: larger ones overflow the learning-rate schedule's
int32 step count) and samples every few seconds, from outside: each node
process's resident memory (RSS) and open file descriptors (pids from the run
directory's nodes/*.json, so restarted nodes are followed), the run
directory's size and the counter's actor steps. Then prints per node the RSS
after the settling time and at the end, the growth per hour in between (the
goal: under 5% an hour), the file descriptors at both times, and the run
directory's growth per million actor steps; writes OUT/soak.json and
OUT/soak_rss.png (RSS of every node over time).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List

import psutil

from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.rundir import actor_steps, node_pids

GOAL_PERCENT_PER_HOUR = 5.0


def _dir_bytes(path: str) -> int:
  total = 0
  for root, _, files in os.walk(path):
    for name in files:
      try:
        total += os.path.getsize(os.path.join(root, name))
      except OSError:
        pass  # Rotated or replaced while walking.
  return total


def sample(run_dir: str, started: float) -> Dict:
  nodes = {}
  for node, pid in node_pids(run_dir).items():
    try:
      process = psutil.Process(pid)
      if process.status() == psutil.STATUS_ZOMBIE:
        continue  # Exited, not yet reaped.
      rss = process.memory_info().rss
      if not rss:
        continue  # Exiting: its memory is already released.
      nodes[node] = {'rss_mib': rss / 2**20, 'fds': process.num_fds()}
    except psutil.Error:
      continue  # Gone (restarting, or the run is stopping).
  return {'seconds': time.time() - started, 'nodes': nodes,
          'dir_bytes': _dir_bytes(run_dir), 'actor_steps': actor_steps(run_dir)}


def analyse(samples: List[Dict], settle_seconds: float) -> Dict:
  """Growth between the settling point and the end, over the samples in
  which every node was up (nodes start, restart and stop at various times);
  the settling time counts from the first such sample."""
  most = max(len(s['nodes']) for s in samples)
  complete = [s for s in samples if len(s['nodes']) == most]
  settle_at = complete[0]['seconds'] + settle_seconds
  settled = next((s for s in complete if s['seconds'] >= settle_at), complete[-1])
  end = complete[-1]
  hours = max(end['seconds'] - settled['seconds'], 1e-9) / 3600
  per_node = {}
  for node in sorted(set(end['nodes']) & set(settled['nodes'])):
    before, after = settled['nodes'][node], end['nodes'][node]
    growth = (after['rss_mib'] - before['rss_mib']) / before['rss_mib'] * 100
    per_node[node] = {
        'rss_mib_settled': round(before['rss_mib'], 1),
        'rss_mib_end': round(after['rss_mib'], 1),
        'rss_growth_percent_per_hour': round(growth / hours, 2),
        'fds_settled': before['fds'], 'fds_end': after['fds']}
  steps = end['actor_steps'] - settled['actor_steps']
  return {
      'settled_at_seconds': round(settled['seconds'], 1),
      'end_seconds': round(end['seconds'], 1),
      'nodes': per_node,
      'dir_mib_settled': round(settled['dir_bytes'] / 2**20, 2),
      'dir_mib_end': round(end['dir_bytes'] / 2**20, 2),
      'dir_mib_per_million_steps': (
          round((end['dir_bytes'] - settled['dir_bytes']) / 2**20 / steps * 1e6, 2)
          if steps > 0 else None),
      'actor_steps_settled': settled['actor_steps'],
      'actor_steps_end': end['actor_steps'],
  }


def plot(samples: List[Dict], path: str) -> None:
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  figure, axes = plt.subplots(figsize=(8, 4.5))
  for node in sorted({n for s in samples for n in s['nodes']}):
    points = [(s['seconds'] / 60, s['nodes'][node]['rss_mib'])
              for s in samples if node in s['nodes']]
    axes.plot([p[0] for p in points], [p[1] for p in points], label=node)
  axes.set_xlabel('minutes')
  axes.set_ylabel('resident memory (MiB)')
  axes.grid(alpha=0.3)
  axes.legend(fontsize='small')
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config', default='ppo_mujoco')
  parser.add_argument('--minutes', type=float, default=30.0)
  parser.add_argument('--every', type=float, default=5.0,
                      help='seconds between samples')
  # 7: after the first checkpoint save (config.checkpoint.interval_minutes,
  # 5 by default), whose one-time allocations (+8 MiB learner, +17 MiB
  # counter, seen here) are not growth.
  parser.add_argument('--settle_minutes', type=float, default=7.0,
                      help='growth is measured from this time on')
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args, launch_flags = parser.parse_known_args(argv)
  launch_flags = [f for f in launch_flags if f != '--']
  if args.minutes <= 0 or args.every <= 0 or args.settle_minutes < 0:
    print('bench/soak.py: error: --minutes and --every must be positive, '
          '--settle_minutes not negative', file=sys.stderr)
    return 2
  settle_seconds = args.settle_minutes * 60
  workdir = os.path.join(args.out, 'soak')
  run_dir = os.path.join(workdir, args.config)
  subprocess.run(['rm', '-rf', run_dir], check=False)
  command = launch_command(
      f'--config={args.config}', '--config.max_actor_steps=1000000000',
      f'--max_wall_time={args.minutes * 60}', f'--workdir={workdir}',
      f'--run_name={args.config}', '--progress_every=60', *launch_flags)
  print('running:', ' '.join(command[1:]), flush=True)
  started = time.time()
  launcher = subprocess.Popen(command, cwd=REPO_ROOT)
  samples = []
  while launcher.poll() is None:
    point = sample(run_dir, started)
    if point['nodes']:
      samples.append(point)
    time.sleep(args.every)
  if not samples:
    print('bench/soak.py: error: no node was ever sampled', file=sys.stderr)
    return 1
  result = analyse(samples, settle_seconds)
  result.update(config=args.config, minutes=args.minutes,
                launch_flags=launch_flags, launcher_exit_code=launcher.returncode)
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'soak.json'), 'w') as f:
    json.dump({**result, 'samples': samples}, f, indent=1)
  plot(samples, os.path.join(args.out, 'soak_rss.png'))

  print(f'\n{args.config}, {args.minutes:g} min; growth from '
        f'{result["settled_at_seconds"] / 60:.1f} min to '
        f'{result["end_seconds"] / 60:.1f} min')
  print(f'{"node":<14} {"RSS settled":>12} {"RSS end":>10} {"growth/h":>10} '
        f'{"fds":>10}')
  for node, n in result['nodes'].items():
    print(f'{node:<14} {n["rss_mib_settled"]:>8,.0f} MiB {n["rss_mib_end"]:>6,.0f} '
          f'MiB {n["rss_growth_percent_per_hour"]:>9.1f}% '
          f'{n["fds_settled"]:>4} -> {n["fds_end"]:<4}')
  per_million = result['dir_mib_per_million_steps']
  print(f'run directory {result["dir_mib_settled"]:,.1f} -> '
        f'{result["dir_mib_end"]:,.1f} MiB; '
        f'{"-" if per_million is None else f"{per_million:,.1f}"} MiB per '
        'million actor steps')
  worst = max((n['rss_growth_percent_per_hour'] for n in result['nodes'].values()),
              default=0.0)
  print(f'largest growth {worst:.1f}%/h (goal: under {GOAL_PERCENT_PER_HOUR:g}%/h); '
        f'curves: {os.path.join(args.out, "soak_rss.png")}')
  return 0 if launcher.returncode == 0 else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
