"""Actor throughput: stock Acme DistributedPPO against acme-launch, side by side.

    .venv/bin/python bench/throughput.py [--seconds=40]
        [--cells=1x1,1x16,1x64,2x16] [--backends=gym,envpool] [--out=bench/out]

(tests/e2e/test_bench.py runs it tiny: --seconds=5 --steps=16000 --warmup=0
...)

Everything runs in this one invocation on this machine:
  1. the ceilings, env steps/s on one core with random actions: gym's
     HalfCheetah-v4 env.step() through our wrappers, and, for each
     envs-per-actor of the cells, one EnvPool of that many HalfCheetah-v4
     environments on one thread through EnvPool's own dm_env API; each
     cell's % is of its backend's ceiling at its envs per actor;
  2. stock Acme: `acme.agents.jax.ppo.DistributedPPO(...).build()`, its own
     program and actors (gym environments), for each actor count (no
     evaluator);
  3. acme-launch: `launch.py --config=ppo_mujoco` with the same PPO settings
     and process count (no evaluator), for each cell (ACTORSxENVS_PER_ACTOR)
     and env backend (config.env_backend; `envpool_async` is EnvPool's
     async mode with twice the cell's envs, each step receiving the cell's
     envs, measured against the same ceiling as `envpool`).
Each program runs for --seconds plus a start-up allowance (or until --steps
actor steps); env steps/s is measured from the counter's totals
(progress.csv) from the first actor steps plus a warm-up to the end, so
process start-up and JIT compilation are left out. The figures are also
written to OUT/throughput.json. Run it on an otherwise idle machine.

Both sides use the same light PPO settings (1 epoch, 4 minibatches, a replay
queue of batch + 1000 sequences, as Acme sizes it) so the learner keeps up:
what is measured is how fast actors produce experience. Stock Acme's
children start through acme_launch.node.entry, since dm-acme 0.4.0 does not
import on JAX 0.4.30 without its aliases; nothing else of acme-launch is in
the stock program (plus one node that reads its counter).
"""

import argparse
import csv
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

os.environ['JAX_PLATFORMS'] = 'cpu'
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from acme_launch import compat

# Light learner so actors are what is measured; same for both sides.
PPO_OVERRIDES = {'num_epochs': 1, 'num_minibatches': 4}
STOCK_QUEUE_EXTRA = 1000  # Acme's PPOBuilder: queue of batch_size + 1000.


def raw_envpool_steps_per_second(seconds: float, num_envs: int = 16) -> float:
  """EnvPool's ceiling: one instance of `num_envs`, one thread, random
  actions through its own dm_env API (nothing of acme-launch)."""
  import envpool
  import numpy as np
  pool = envpool.make_dm('HalfCheetah-v4', num_envs=num_envs,
                         batch_size=num_envs, seed=0, num_threads=1)
  shape = (num_envs,) + pool.action_spec().shape
  env_ids = np.arange(num_envs, dtype=np.int32)
  rng = np.random.default_rng(0)
  actions = [rng.uniform(-1, 1, shape) for _ in range(64)]
  pool.reset()
  steps, start = 0, time.time()
  while time.time() - start < seconds:
    pool.step(actions[steps % 64], env_ids)
    steps += 1
  elapsed = time.time() - start
  pool.close()
  return steps * num_envs / elapsed


def raw_env_steps_per_second(seconds: float) -> float:
  """One core's ceiling: env.step() with random actions, nothing else."""
  import numpy as np
  from acme_launch import envs as environments
  environment = environments.make_environment('HalfCheetah-v4', seed=0)
  spec = environment.action_spec()
  rng = np.random.default_rng(0)
  environment.reset()
  steps, start = 0, time.time()
  while time.time() - start < seconds:
    action = rng.uniform(spec.minimum, spec.maximum).astype(spec.dtype)
    if environment.step(action).last():
      environment.reset()
    steps += 1
  return steps / (time.time() - start)


def steady_rate(progress_csv: str, warmup: float) -> Optional[float]:
  """Actor env steps/s from the counter's totals, after start-up."""
  if not os.path.isfile(progress_csv):
    return None
  with open(progress_csv, newline='') as f:
    rows = [(float(r['wall_time']), float(r['actor_steps'])) for r in csv.DictReader(f)]
  moving = [i for i, (_, steps) in enumerate(rows) if steps > 0]
  if not moving:
    return None
  start_time = rows[moving[0]][0] + warmup
  window = [r for r in rows if r[0] >= start_time]
  if len(window) < 2 or window[-1][0] <= window[0][0]:
    return None
  return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def run_acme_launch(workdir: str, actors: int, envs: int, backend: str,
                    args: argparse.Namespace, extra_flags: Tuple[str, ...] = (),
                    run_name: str = '', prefix: Tuple[str, ...] = (),
                    env: Optional[Dict[str, str]] = None) -> Optional[float]:
  """`prefix` and `env`: how bench/cluster.py runs it in a host's namespace."""
  from acme_launch.configs import ppo_mujoco
  batch_size = ppo_mujoco.get_config().ppo.batch_size
  queue_batches = -(-(batch_size + STOCK_QUEUE_EXTRA) // batch_size)
  run_name = run_name or f'acme_launch_{backend}_a{actors}_e{envs}'
  # envpool: sync, every step all of an actor's envs; envpool_async: twice
  # the envs, each step the first half to finish (config.envpool_async_envs).
  async_envs = 0
  if backend == 'envpool_async':
    backend, async_envs = 'envpool', 2 * envs
  command = [*prefix, *launch_command('--config=ppo_mujoco'),
             f'--workdir={workdir}', f'--run_name={run_name}',
             f'--config.num_actors={actors}',
             f'--config.envs_per_actor={envs}', '--config.num_evaluators=0',
             f'--config.env_backend={backend}',
             f'--config.envpool_async_envs={async_envs}',
             f'--max_wall_time={args.seconds + args.startup_allowance}',
             f'--config.ppo.max_queue_batches={queue_batches}',
             f'--config.max_actor_steps={args.steps}', '--progress_every=1000']
  command += [f'--config.ppo.{k}={v}' for k, v in PPO_OVERRIDES.items()]
  command += list(extra_flags)
  result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                          text=True, check=False, env=env)
  rate = steady_rate(os.path.join(workdir, run_name, 'metrics', 'progress.csv'),
                     args.warmup)
  if rate is None:  # Say why, rather than print 'failed' alone.
    print(f'{run_name}: no steady rate (launch exit {result.returncode}); '
          f'its output ends:\n{result.stdout[-1500:]}{result.stderr[-1500:]}',
          file=sys.stderr)
  return rate


def run_stock_acme(workdir: str, actors: int,
                   args: argparse.Namespace) -> Optional[float]:
  """Acme's own DistributedPPO program, plus a node that reads its counter."""
  from acme.agents.jax import ppo
  import launchpad as lp
  from acme_launch.configs import ppo_mujoco
  from acme_launch import envs as environments
  from acme_launch.program import nodes
  from acme_launch.program import build as program_lib
  from acme_launch.plan import resources
  from acme_launch.plan import specs
  from acme_launch.run import rundir
  from acme_launch.run.local_mp import launch as local_mp
  from acme_launch.agents.ppo import builder as ppo_adapter

  config = ppo_mujoco.get_config()
  config.max_actor_steps = args.steps
  # PPOConfig's own fields, with the learning rate schedule acme-launch's
  # PPO adapter uses; acme-launch's extra fields are left out.
  fields, _ = ppo_adapter.split_fields(config)
  fields.update(PPO_OVERRIDES)
  run_dir = os.path.join(workdir, f'stock_acme_a{actors}')
  rundir.create(run_dir)
  agent = ppo.DistributedPPO(
      environment_factory=lambda is_eval: environments.make_environment(
          'HalfCheetah-v4', seed=0),
      network_factory=functools.partial(
          ppo.make_gym_networks,
          policy_layer_sizes=tuple(config.network.policy_layers),
          value_layer_sizes=tuple(config.network.value_layers)),
      config=ppo.PPOConfig(**fields), seed=0, num_actors=actors,
      evaluator_factories=[])
  program = agent.build()
  counter = program.groups['counter'][0].create_handle()
  with program.group('monitor'):
    program.add_node(lp.CourierNode(nodes.PollingStepsLimiter, counter,
                                    args.steps, run_dir))

  names = {'replay': ['replay/0'], 'counter': ['counter/0'],
           'learner': ['learner/0'], 'actor': [f'actor/{i}' for i in range(actors)],
           'monitor': ['monitor/0']}
  plan = resources.plan_resources(
      [('replay', 0), ('counter', 0), ('learner', 0)] +
      [('actor', i) for i in range(actors)], specs.default_resources_config())
  plan = resources.ResourcePlan(plan.placements + (
      resources.NodePlacement('monitor/0', 'counter', 'monitor', (),
                              plan.placement('counter/0').env),))
  built = program_lib.BuiltProgram(program, names)
  local_mp.Supervisor(
      run_dir, max_wall_time=args.seconds + args.startup_allowance,
  ).run_multiprocess(built, plan)
  return steady_rate(os.path.join(run_dir, 'metrics', 'progress.csv'),
                     args.warmup)


def _fraction(rate: Optional[float], actors: int, ceiling: float,
              cores: int) -> Optional[float]:
  """Env steps/s per actor core, as a fraction of the backend's ceiling at
  the same envs per actor."""
  return rate / min(actors, cores) / ceiling if rate else None


def print_table(stock: Dict[int, Optional[float]],
                ours: Dict[Tuple[str, int, int], Optional[float]],
                ceilings: Dict[Tuple[str, int], float], cells: List[Tuple[int, int]],
                backends: List[str], cores: int) -> None:
  """env steps/s per cell and backend, ratios to stock Acme and to gym."""
  print('\nenv steps/s (actor experience produced, learner running); x = '
        'ratio to stock Acme at the same actor count; % = of the backend\'s '
        'one-core ceiling at the same envs per actor, measured above, per '
        f'actor core (min(actors, {cores}) cores; the '
        f'learner, replay and counter share the same {cores} cores)')
  header = f'{"actors x envs":>13} {"stock Acme":>11}'
  for backend in backends:
    header += f' {backend:>9} {"x":>5} {"%":>4}'
  if {'gym', 'envpool'} <= set(backends):
    header += f' {"envpool/gym":>11}'
  print(header)
  for actors, envs in cells:
    line = f'{f"{actors} x {envs}":>13} {number(stock[actors]):>11}'
    for backend in backends:
      rate = ours[backend, actors, envs]
      ratio = f'{rate / stock[actors]:.1f}x' if rate and stock[actors] else '-'
      fraction = _fraction(rate, actors, ceilings[backend, envs], cores)
      percent = f'{100 * fraction:.0f}%' if fraction else '-'
      line += f' {number(rate):>9} {ratio:>5} {percent:>4}'
    if {'gym', 'envpool'} <= set(backends):
      gym, pool = ours['gym', actors, envs], ours['envpool', actors, envs]
      line += f' {f"{pool / gym:.1f}x" if gym and pool else "-":>11}'
    print(line)


def add_program_arguments(parser: argparse.ArgumentParser) -> None:
  """How long each measured program runs: this script's and cluster.py's."""
  parser.add_argument('--seconds', type=float, default=40.0,
                      help='measured seconds per program')
  parser.add_argument('--warmup', type=float, default=5.0,
                      help='seconds after the first actor steps left out')
  parser.add_argument('--startup_allowance', type=float, default=60.0,
                      help='seconds allowed for start-up, not measured')
  parser.add_argument('--steps', type=int, default=100_000_000,
                      help='actor step budget: a program also stops there')


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_program_arguments(parser)
  parser.add_argument('--ceiling_seconds', type=float, default=5.0)
  parser.add_argument('--cells', default='1x1,1x16,1x64,2x16',
                      help='ACTORSxENVS_PER_ACTOR, comma-separated')
  parser.add_argument('--backends', default='gym,envpool',
                      help='config.env_backend values to measure; '
                      'envpool_async: EnvPool in async mode, twice the envs '
                      'of the cell, each step receiving the cell\'s envs')
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
  cells = [tuple(int(x) for x in cell.split('x'))
           for cell in args.cells.split(',')]
  backends = args.backends.split(',')
  workdir = os.path.join(args.out, 'throughput')
  shutil.rmtree(workdir, ignore_errors=True)
  os.makedirs(workdir)

  # Each backend's one-core ceiling, at every envs-per-actor of the cells
  # (EnvPool's rate depends on it; gym's env.step() is per env).
  ceilings = {('gym', 1): raw_env_steps_per_second(args.ceiling_seconds)}
  for _, envs in cells:
    ceilings['gym', envs] = ceilings['gym', 1]
    if {'envpool', 'envpool_async'} & set(backends) and (
        'envpool', envs) not in ceilings:
      ceilings['envpool', envs] = raw_envpool_steps_per_second(
          args.ceiling_seconds, envs)
    # Async mode is measured against the same ceiling: EnvPool stepping
    # as many envs a step as the actor's policy call takes.
    if ('envpool', envs) in ceilings:
      ceilings['envpool_async', envs] = ceilings['envpool', envs]
  print(f'machine: {os.cpu_count()} cores; {args.seconds:.0f} s per program; '
        f'load average {os.getloadavg()[0]:.1f} at start')
  print('ceilings, HalfCheetah-v4 on one core with random actions: gym '
        f'env.step() {ceilings["gym", 1]:,.0f} steps/s; EnvPool on one thread '
        + ', '.join(f'{e} envs {r:,.0f}' for (b, e), r in sorted(
            ceilings.items()) if b == 'envpool') + ' steps/s\n')

  stock: Dict[int, Optional[float]] = {}
  ours: Dict[Tuple[str, int, int], Optional[float]] = {}
  for actors, envs in cells:
    if actors not in stock:
      stock[actors] = run_stock_acme(workdir, actors, args)
      print(f'stock Acme DistributedPPO, {actors} actor(s): '
            f'{number(stock[actors])} env steps/s', flush=True)
    for backend in backends:
      ours[backend, actors, envs] = run_acme_launch(workdir, actors, envs,
                                                    backend, args)
      print(f'acme-launch {backend}, {actors} actor(s) x {envs} env(s): '
            f'{number(ours[backend, actors, envs])} env steps/s', flush=True)

  print_table(stock, ours, ceilings, cells, backends, os.cpu_count() or 1)
  print(f'load average {os.getloadavg()[0]:.1f} at the end')
  with open(os.path.join(args.out, 'throughput.json'), 'w') as f:
    json.dump({'cores': os.cpu_count(), 'seconds': args.seconds,
               'load_average': os.getloadavg()[0],
               # Per backend: the 16-env figure (or the first cell's) as
               # before, and every envs-per-actor measured.
               'ceilings': {b: ceilings.get((b, 16), next(
                   r for (bb, _), r in ceilings.items() if bb == b))
                            for b in {b for b, _ in ceilings}},
               'ceilings_by_envs': [
                   {'backend': b, 'envs': e, 'env_steps_per_second': r}
                   for (b, e), r in sorted(ceilings.items())
                   if b != 'envpool_async'],
               'stock_acme': [{'actors': a, 'env_steps_per_second': r}
                              for a, r in stock.items()],
               'acme_launch': [{'backend': b, 'actors': a, 'envs_per_actor': e,
                                'env_steps_per_second': r,
                                'fraction_of_ceiling': _fraction(
                                    r, a, ceilings[b, e], os.cpu_count() or 1)}
                               for (b, a, e), r in ours.items()]}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
