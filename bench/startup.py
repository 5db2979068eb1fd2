"""Start-up figures: seconds to the first actor and learner step, memory per node.

    .venv/bin/python bench/startup.py [--config=ppo_mujoco] [--out=bench/out]

Launches the config, lets it run until the first
learner step plus a few seconds, stops it with SIGINT, and prints
seconds from launch to the first actor step and the first learner step (from
the counter totals in metrics/progress.csv; with envs_per_actor=1 Acme counts
actor steps at the end of each episode, so "first actor step" is the end of
the first episode) and each node process's resident
memory (psutil, sampled once every node is stepping); also written to
OUT/startup.json.
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
from typing import List

import psutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from tests.conftest import node_pids  # pylint: disable=g-import-not-at-top


def _first_time(progress_csv: str, key: str):
  if not os.path.isfile(progress_csv):
    return None
  with open(progress_csv, newline='') as f:
    for row in csv.DictReader(f):
      if float(row[key]) > 0:
        return float(row['wall_time'])
  return None


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config', default='ppo_mujoco')
  parser.add_argument('--timeout', type=float, default=300.0)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
  workdir = os.path.join(args.out, 'startup')
  shutil.rmtree(workdir, ignore_errors=True)
  run_dir = os.path.join(workdir, 'run')
  progress_csv = os.path.join(run_dir, 'metrics', 'progress.csv')

  started = time.time()
  launcher = subprocess.Popen(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), f'--config={args.config}',
       f'--workdir={workdir}', '--run_name=run', '--progress_every=1000'],
      cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  memory = {}
  try:
    while time.time() - started < args.timeout:
      time.sleep(1.0)
      if _first_time(progress_csv, 'learner_steps'):
        time.sleep(3.0)
        for node, pid in sorted(node_pids(run_dir).items()):
          try:
            memory[node] = psutil.Process(pid).memory_info().rss / 2**20
          except psutil.NoSuchProcess:
            pass
        break
  finally:
    launcher.send_signal(signal.SIGINT)
    launcher.wait(timeout=60)

  first_actor = _first_time(progress_csv, 'actor_steps')
  first_learner = _first_time(progress_csv, 'learner_steps')
  print(f'config {args.config} on {os.cpu_count()} cores')
  for what, when in (('first actor step', first_actor),
                     ('first learner step', first_learner)):
    print(f'{what:<20} ' + (f'{when - started:.1f} s after launch' if when else 'not reached'))
  print('\nresident memory per node process (MiB)')
  for node, mib in memory.items():
    print(f'  {node:<14} {mib:8.0f}')
  if memory:
    print(f'  {"total":<14} {sum(memory.values()):8.0f}')
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'startup.json'), 'w') as f:
    json.dump({'config': args.config, 'cores': os.cpu_count(),
               'first_actor_step_seconds':
                   first_actor - started if first_actor else None,
               'first_learner_step_seconds':
                   first_learner - started if first_learner else None,
               'resident_mib': memory}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
