"""Env steps/s of one Atari game through each backend, side by side.

    nice -n 19 .venv/bin/python bench/atari_backends.py [--game=Pong] [--steps=5000] [--rounds=3] [--out=bench/out]

Each backend makes the game as an actor does (envs/factory.py
make_environment: the training protocol, one environment, EnvPool with one
thread) and plays `--steps` uniformly random actions, restarting each ended
episode, after a warm-up of a tenth of that. The backends alternate round
by round (envpool, gym, gym, envpool, ...) so that load from other work
falls on both. An env step is one agent step: 4 emulator frames. Prints
each round and each backend's median over the rounds (robust to a round
that other work slowed down) of env steps per wall-clock second and per
CPU second of the process (all its threads: other work's load changes it
less), with their ratios; writes them to OUT/atari_backends.json.
"""

import argparse
import json
import os
import statistics
import time

from acme_launch.testing.launcher import REPO_ROOT

BACKENDS = ('envpool', 'gym')


def steps_per_second(game: str, backend: str, steps: int, seed: int):
  """(env steps per wall-clock second, per CPU second of this process:
  every thread, EnvPool's included)."""
  import numpy as np
  from acme_launch import envs as environments
  environment = environments.make_environment(f'atari:{game}', seed,
                                              backend=backend)
  actions = np.random.default_rng(seed).integers(
      0, environment.action_spec().num_values, steps + steps // 10)

  def play(chosen):
    timestep = environment.reset()
    for action in chosen:
      timestep = (environment.reset() if timestep.last()
                  else environment.step(action))

  play(actions[:steps // 10])  # Warm-up: first calls, caches.
  start, cpu_start = time.perf_counter(), time.process_time()
  play(actions[steps // 10:])
  elapsed = time.perf_counter() - start
  cpu = time.process_time() - cpu_start
  environment.close()
  return steps / elapsed, steps / cpu


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--game', default='Pong')
  parser.add_argument('--steps', type=int, default=5000)
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args()
  rates = {backend: [] for backend in BACKENDS}
  for round_index in range(args.rounds):
    order = BACKENDS if round_index % 2 == 0 else BACKENDS[::-1]
    for backend in order:
      wall, cpu = steps_per_second(args.game, backend, args.steps,
                                   round_index)
      rates[backend].append((wall, cpu))
      print(f'round {round_index + 1} {backend:8s} {wall:8.0f} env steps/s, '
            f'{cpu:8.0f} per CPU second', flush=True)
  medians = {b: [statistics.median(r[k] for r in rates[b]) for k in (0, 1)]
             for b in BACKENDS}
  print(f'atari:{args.game}, one environment, one thread, training '
        f'protocol, {args.steps} steps x {args.rounds} rounds:')
  for backend in BACKENDS:
    wall, cpu = medians[backend]
    print(f'  {backend:8s} {wall:8.0f} env steps/s, {cpu:8.0f} per CPU '
          'second (medians)')
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'atari_backends.json'), 'w') as f:
    json.dump({'game': args.game, 'steps': args.steps, 'rounds': [
        {'backend': b, 'env_steps_per_second': w, 'per_cpu_second': c}
        for b in BACKENDS for w, c in rates[b]], 'medians': {
            b: {'env_steps_per_second': m[0], 'per_cpu_second': m[1]}
            for b, m in medians.items()}}, f, indent=1)
  print('  gym / envpool: '
        f'{medians["gym"][0] / medians["envpool"][0]:.2f} (wall clock), '
        f'{medians["gym"][1] / medians["envpool"][1]:.2f} (CPU)')


if __name__ == '__main__':
  main()
