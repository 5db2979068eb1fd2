"""Learning benchmark: PPO on HalfCheetah-v4 for 1M env steps.

    .venv/bin/python bench/learning.py [--steps=1000000] [--out=bench/out]
        [-- extra launch.py flags, e.g. --config.num_actors=2]

Runs `launch.py --config=ppo_mujoco` to the step budget in its own run
directory, then prints the final evaluation return, the wall time and env
steps/s, and writes the learning curve (evaluation return against actor
steps) as PNG with acme_launch.plot. Reference point: a well-known
single-file PPO reaches about 1,440 at 1M steps in about 25 minutes on CPU.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import List

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args, launch_flags = parser.parse_known_args(argv)
  launch_flags = [f for f in launch_flags if f != '--']
  workdir = os.path.join(args.out, 'learning')
  shutil.rmtree(os.path.join(workdir, 'ppo_halfcheetah'), ignore_errors=True)

  command = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
             '--config=ppo_mujoco', f'--config.max_actor_steps={args.steps}',
             f'--workdir={workdir}', '--run_name=ppo_halfcheetah',
             '--progress_every=60', *launch_flags]
  print('running:', ' '.join(command[1:]), flush=True)
  result = subprocess.run(command, cwd=REPO_ROOT, check=False)
  run_dir = os.path.join(workdir, 'ppo_halfcheetah')
  with open(os.path.join(run_dir, 'summary.json')) as f:
    summary = json.load(f)
  subprocess.run([sys.executable, '-m', 'acme_launch.plot', run_dir,
                  '--out', args.out], cwd=REPO_ROOT, check=False)
  print(f'\nPPO HalfCheetah-v4, {summary["actor_steps"]:,} actor steps '
        f'({summary["exit_reason"]}) on {os.cpu_count()} cores')
  print(f'final evaluation return: {summary["last_eval_return"]}')
  print(f'wall time: {summary["wall_time_seconds"] / 60:.1f} min, '
        f'{summary["env_steps_per_second"]:,.0f} env steps/s')
  print(f'curve: {os.path.join(args.out, "eval_return.png")}')
  return result.returncode


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
