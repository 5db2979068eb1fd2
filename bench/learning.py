"""Learning benchmark: PPO on HalfCheetah-v4 for 1M env steps.

    .venv/bin/python bench/learning.py [--steps=1000000] [--seeds=0,1,2]
        [--config=ppo_mujoco] [--out=bench/out]
        [-- extra launch.py flags, e.g. --config.num_actors=2]

Runs `launch.py --config=ppo_mujoco` to the step budget once per seed, each
in its own run directory, then prints each run's final evaluation return
(the last evaluation, every 50k actor steps), wall time and env steps/s, and
the mean over seeds, and writes each learning curve (evaluation return
against actor steps) as PNG with acme_launch.plot; the table is also
written to OUT/learning.json. Reference point: a well-known
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


def run_one(config: str, seed: int, steps: int, workdir: str, out: str,
            launch_flags: List[str]) -> dict:
  """One launch to the step budget; its summary, with the curve drawn."""
  run_name = f'{config}_seed{seed}'
  shutil.rmtree(os.path.join(workdir, run_name), ignore_errors=True)
  command = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
             f'--config={config}', f'--config.max_actor_steps={steps}',
             f'--config.seed={seed}', f'--workdir={workdir}',
             f'--run_name={run_name}', '--progress_every=60', *launch_flags]
  print('running:', ' '.join(command[1:]), flush=True)
  result = subprocess.run(command, cwd=REPO_ROOT, check=False)
  run_dir = os.path.join(workdir, run_name)
  with open(os.path.join(run_dir, 'summary.json')) as f:
    summary = json.load(f)
  summary['returncode'] = result.returncode
  plot_dir = os.path.join(out, run_name)
  subprocess.run([sys.executable, '-m', 'acme_launch.plot', run_dir,
                  '--out', plot_dir], cwd=REPO_ROOT, check=False)
  summary['curve'] = os.path.join(plot_dir, 'eval_return.png')
  return summary


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--seeds', default='0',
                      help='comma-separated config seeds, one run each')
  parser.add_argument('--config', default='ppo_mujoco')
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args, launch_flags = parser.parse_known_args(argv)
  launch_flags = [f for f in launch_flags if f != '--']
  workdir = os.path.join(args.out, 'learning')
  seeds = [int(s) for s in args.seeds.split(',')]
  summaries = [run_one(args.config, seed, args.steps, workdir, args.out,
                       launch_flags) for seed in seeds]
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'learning.json'), 'w') as f:
    json.dump({'config': args.config, 'launch_flags': launch_flags,
               'runs': [{'seed': seed, **summary}
                        for seed, summary in zip(seeds, summaries)]},
              f, indent=1)

  print(f'\n{args.config} on {os.cpu_count()} cores; launch flags: '
        f'{" ".join(launch_flags) or "(config defaults)"}')
  print(f'{"seed":>4} {"actor steps":>12} {"final eval return":>18} '
        f'{"wall time":>10} {"env steps/s":>12}  curve')
  for seed, summary in zip(seeds, summaries):
    final = summary['last_eval_return']
    print(f'{seed:>4} {summary["actor_steps"]:>12,} '
          f'{"-" if final is None else f"{final:,.0f}":>18} '
          f'{summary["wall_time_seconds"] / 60:>8.1f} m '
          f'{summary["env_steps_per_second"]:>12,.0f}  {summary["curve"]}')
  finals = [s['last_eval_return'] for s in summaries
            if s['last_eval_return'] is not None]
  if finals:
    print(f'mean final evaluation return {sum(finals) / len(finals):,.0f} '
          f'(min {min(finals):,.0f}, max {max(finals):,.0f}) over '
          f'{len(finals)} seed(s)')
  return max(s['returncode'] for s in summaries)


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
