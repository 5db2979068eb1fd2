"""Start-up figures: seconds to the first actor and learner step, cold and
warm, and memory per node.

    .venv/bin/python bench/startup.py [--config=ppo_mujoco] [--out=bench/out]
        [--node_start=fork,exec]

For each --node_start mode given (how local_mp starts node processes: exec,
or forked from one fork server), launches the config twice in a row with one
new JAX compilation cache folder
(--compilation_cache): `cold` starts with it empty and fills it, `warm`
reads it, as a second run of the same config on the same machine does. Each
run goes until its first learner step plus a few seconds and is then stopped
with SIGINT. Prints, for each, seconds from launch to the first actor step
and the first learner step (from the counter totals in
metrics/progress.csv; with envs_per_actor=1 Acme counts actor steps at the
end of each episode, so "first actor step" is the end of the first episode),
the CPU seconds the launcher and its processes had used at the first
actor step, the cache entries each wrote and read, and each node process's resident memory (psutil,
sampled once every node is stepping); also written to OUT/startup.json.
"""

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List

import psutil

from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.rundir import node_pids


def _first_time(progress_csv: str, key: str):
  if not os.path.isfile(progress_csv):
    return None
  with open(progress_csv, newline='') as f:
    for row in csv.DictReader(f):
      if float(row[key]) > 0:
        return float(row['wall_time'])
  return None


def _entries(cache: str) -> Dict[str, float]:
  """The cache's entries and their modification times (JAX's cache touches
  an entry when it reads it)."""
  return {name: os.path.getmtime(os.path.join(cache, name))
          for name in os.listdir(cache) if not name.startswith(('.', '_'))}


def _tree_cpu_seconds(pid: int) -> float:
  """CPU seconds (user + system) used so far by `pid` and its descendants
  (the launcher, its node processes and, with fork, the fork server)."""
  try:
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
  except psutil.NoSuchProcess:
    return 0.0
  total = 0.0
  for process in processes:
    try:
      times = process.cpu_times()
      total += times.user + times.system
    except psutil.NoSuchProcess:
      pass
  return total


def measure(config: str, workdir: str, cache: str, timeout: float,
            node_start: str = 'exec') -> Dict[str, object]:
  """One launch until its first learner step: its start-up figures."""
  shutil.rmtree(workdir, ignore_errors=True)
  run_dir = os.path.join(workdir, 'run')
  progress_csv = os.path.join(run_dir, 'metrics', 'progress.csv')
  before = _entries(cache)
  started = time.time()
  launcher = subprocess.Popen(
      launch_command(f'--config={config}', f'--workdir={workdir}',
                     '--run_name=run', '--progress_every=1000',
                     f'--compilation_cache={cache}',
                     f'--node_start={node_start}'),
      cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  memory = {}
  cpu_at_first_actor_step = None
  try:
    while time.time() - started < timeout:
      time.sleep(0.5)
      if cpu_at_first_actor_step is None and _first_time(progress_csv,
                                                         'actor_steps'):
        cpu_at_first_actor_step = _tree_cpu_seconds(launcher.pid)
      if _first_time(progress_csv, 'learner_steps'):
        # Each node's RSS over the next 3 s, the last reading kept: a short
        # program (the tests' smoke config) may end within them.
        settled = time.time() + 3.0
        while True:
          for node, pid in sorted(node_pids(run_dir).items()):
            try:
              memory[node] = psutil.Process(pid).memory_info().rss / 2**20
            except psutil.NoSuchProcess:
              pass
          if time.time() >= settled or launcher.poll() is not None:
            break
          time.sleep(0.5)
        break
  finally:
    launcher.send_signal(signal.SIGINT)
    launcher.wait(timeout=60)
  first_actor = _first_time(progress_csv, 'actor_steps')
  first_learner = _first_time(progress_csv, 'learner_steps')
  after = _entries(cache)
  return {
      'cache_entries_written': len(set(after) - set(before)),
      'cache_entries_read': sum(1 for name in before
                                if after.get(name, 0) >= started),
      'first_actor_step_seconds': first_actor - started if first_actor else None,
      'first_learner_step_seconds':
          first_learner - started if first_learner else None,
      # Once progress.csv shows the first actor step; the figure that
      # matters on a loaded machine, where wall time mostly waits.
      'cpu_seconds_to_first_actor_step': cpu_at_first_actor_step,
      'resident_mib': memory,
  }


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config', default='ppo_mujoco')
  parser.add_argument('--timeout', type=float, default=300.0)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  parser.add_argument('--node_start', default='fork',
                      help='comma-separated modes to measure: fork (the '
                      'launcher\'s default), exec')
  args = parser.parse_args(argv)
  modes = [m.strip() for m in args.node_start.split(',') if m.strip()]
  if not modes or set(modes) - {'exec', 'fork'}:
    parser.error('--node_start takes exec, fork or exec,fork')
  results = {}
  for mode in modes:
    workdir = os.path.join(args.out, 'startup', mode)
    cache = os.path.join(workdir, 'jax_cache')
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(cache)
    results[mode] = {
        name: measure(args.config, os.path.join(workdir, name), cache,
                      args.timeout, node_start=mode)
        for name in ('cold', 'warm')}

  runs = [(mode, name) for mode in modes for name in ('cold', 'warm')]
  print(f'config {args.config} on {os.cpu_count()} cores; seconds after launch')
  print(f'{"":<20} ' + ' '.join(f'{m + " " + n:>11}' for m, n in runs))
  for what, key in (('first actor step', 'first_actor_step_seconds'),
                    ('first learner step', 'first_learner_step_seconds')):
    cells = [results[m][n][key] for m, n in runs]
    print(f'{what:<20} ' + ' '.join(
        f'{c:11.1f}' if c else f'{"never":>11}' for c in cells))
  cells = [results[m][n]['cpu_seconds_to_first_actor_step'] for m, n in runs]
  print(f'{"CPU s, actor step":<20} ' + ' '.join(
      f'{c:11.1f}' if c else f'{"never":>11}' for c in cells))
  for what in ('written', 'read'):
    key = f'cache_entries_{what}'
    print(f'{"cache entries " + what:<20} ' + ' '.join(
        f'{results[m][n][key]:11d}' for m, n in runs))
  for mode in modes:
    print(f'\nresident memory per node process, {mode} warm run (MiB)')
    memory = results[mode]['warm']['resident_mib']
    for node, mib in memory.items():
      print(f'  {node:<14} {mib:8.0f}')
    if memory:
      print(f'  {"total":<14} {sum(memory.values()):8.0f}')
  with open(os.path.join(args.out, 'startup.json'), 'w') as f:
    json.dump({'config': args.config, 'cores': os.cpu_count(),
               'node_start': results}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
