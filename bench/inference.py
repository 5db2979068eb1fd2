"""Actors' env steps/s with per-actor and with central inference, side by side.

    .venv/bin/python bench/inference.py [--configs=r2d2_atari,impala_atari,dqn_atari]
        [--seconds=30] [--settle=20] [--repeats=1] [--batch_sizes=1,2,4,8]
        [--out=bench/out] [-- EXTRA LAUNCH FLAGS]

Each config runs as a whole program (`launch.py --config=CONFIG`), twice a
repeat, one program after the other: `--config.inference=actor` (each actor
runs its own policy) and `--config.inference=central` (one inference node
answers every actor's calls in batches). What is measured is the actors, the
inference node and the replay: the configs' actors are held back by the
replay's rate limiter, so here nothing limits inserts (off-policy agents
wait for a full table before they sample, `min_replay_size` raised to
`max_replay_size`; IMPALA's learner batch is larger than the bench
fills), the learner never samples (it serves parameters), and there is no
evaluator. Over --seconds, from --settle seconds after the first actor
steps: the actors' env steps/s (the counter's totals in
metrics/progress.csv) and, with central inference, the node's mean batch:
calls (one per actor step) and rows (environments) per batch
(metrics/inference_0.csv). Prints a table and the central/actor ratio per
config; also OUT/inference.json.

`--batch_sizes`: first, what a batch costs the node, in this process: the
node's own step (program/inference.py, the config's network, parameters
from its init) on random observations, for each batch size in rows (one
environment a call), its ms a call, CPU ms a call and rows/s over a second
each; `--seconds=0` runs no programs.
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
from typing import Dict, List, Optional

from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

MODES = ('actor', 'central')


def node_steps(config):
  """(the inference node's step, the config's environment spec, params):
  the steps object the program builds for the node, params from the
  networks' init."""
  from acme_launch import compat  # noqa: F401  JAX aliases; before acme
  from acme import specs
  import jax
  import jax.numpy as jnp
  import numpy as np
  from acme_launch import agents
  from acme_launch import envs
  from acme_launch.program import inference
  adapter = agents.load(config.agent)
  spec = specs.make_environment_spec(envs.make_environment(
      config.env_name, seed=0, backend=config.env_backend, config=config))
  networks = adapter.make_networks(config, spec)
  policy = adapter.make_policy(config, networks, spec, evaluation=False)
  key = jax.random.PRNGKey(0)
  rows = 64
  keys = np.stack([jax.random.PRNGKey(i) for i in range(rows)])
  if adapter.recurrent:
    if config.agent == 'impala':
      params = networks.unroll_init_fn(key, networks.initial_state_fn(
          networks.initial_state_init_fn(key)))
    else:
      state = networks.initial_state.apply(
          networks.initial_state.init(key, 1), key, 1)
      params = networks.forward.init(key, jnp.zeros(
          (1,) + spec.observations.shape, spec.observations.dtype), state)
    steps = inference.RecurrentSteps(
        adapter.make_actor_core(config, networks, policy), keys, 1)
  else:
    init = getattr(networks, 'init', None) or networks.network.init
    params = init(key)
    inputs = None
    if adapter.actor_policy_inputs:
      one = config.copy_and_resolve_references()
      one.envs_per_actor, one.num_actors = 1, rows
      inputs = [adapter.actor_policy_inputs(one, i) for i in range(rows)]
      inputs = None if inputs[0] is None else inputs
    if inputs is None:
      policy = agents.make_actor_policy(adapter, config, networks, spec, 0)
    steps = inference.FeedForwardSteps(policy, keys,
                                       adapter.policy_returns_extras, inputs)
  return steps, spec, params


def batch_costs(config, sizes: List[int], seconds: float = 1.0):
  """[(rows, ms a call, CPU ms a call)] of the node's step."""
  import numpy as np
  steps, spec, params = node_steps(config)
  rng = np.random.default_rng(0)
  costs = []
  for size in sizes:
    shape = (1,) + spec.observations.shape
    if spec.observations.dtype == np.uint8:
      observations = [rng.integers(0, 256, shape, np.uint8)
                      for _ in range(size)]
    else:
      observations = [rng.normal(0, 1, shape).astype(spec.observations.dtype)
                      for _ in range(size)]
    requests = [(i, observations[i], np.zeros(1, np.int64),
                 np.zeros(1, bool)) for i in range(size)]
    steps(params, requests)  # Compiles.
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
      steps(params, requests)
      calls += 1
    costs.append((size, 1e3 * (time.perf_counter() - start) / calls,
                  1e3 * (time.process_time() - cpu) / calls))
  return costs


def _load_config(name: str, overrides: List[str]):
  from acme_launch import prepare
  return prepare.check_arguments(['launch.py', f'--config={name}',
                                  *overrides]).config


def unlimited(config) -> List[str]:
  """Flags that take the config's replay rate limit and learner away."""
  flags = ['--config.num_evaluators=0', '--config.checkpoint.replay=false',
           '--config.max_actor_steps=1000000000',
           '--config.log_every_seconds=1']
  section = config.get(config.agent)
  if section is not None and 'min_replay_size' in section:
    flags.append(f'--config.{config.agent}.min_replay_size='
                 f'{section.max_replay_size}')
  if config.agent == 'impala':  # Its queue's limiter samples from 1 item.
    flags += ['--config.impala.batch_size=4096',
              '--config.impala.max_queue_size=4098']
  return flags


def _rows(path: str, columns) -> List[List[float]]:
  if not os.path.isfile(path):
    return []
  with open(path, newline='') as f:
    return [[float(r[c]) for c in columns] for r in csv.DictReader(f)]


def _at(rows, when: float) -> Optional[List[float]]:
  later = [r for r in rows if r[0] >= when]
  return later[0] if later else None


def measure(config_name: str, mode: str, extra: List[str], seconds: float,
            settle: float, workdir: str, timeout: float) -> Dict[str, float]:
  """{env_steps_per_second, batch_calls, batch_rows} of one run."""
  shutil.rmtree(workdir, ignore_errors=True)
  metrics = os.path.join(workdir, 'run', 'metrics')
  progress = lambda: _rows(os.path.join(metrics, 'progress.csv'),
                           ('wall_time', 'actor_steps'))
  batches = lambda: _rows(os.path.join(metrics, 'inference_0.csv'),
                          ('wall_time', 'batches', 'calls', 'rows'))
  launcher = subprocess.Popen(
      launch_command(f'--config={config_name}', f'--workdir={workdir}',
                     '--run_name=run', '--progress_every=1000',
                     f'--config.inference={mode}', *extra),
      cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
      text=True)
  started, first = time.time(), None
  try:
    while time.time() - started < timeout and launcher.poll() is None:
      time.sleep(1.0)
      rows = progress()
      stepping = [r for r in rows if r[1] > 0]
      if first is None and stepping:
        first = stepping[0][0]
      if first is not None and rows[-1][0] >= first + settle + seconds:
        break
  finally:
    launcher.send_signal(signal.SIGINT)
    _, stderr = launcher.communicate(timeout=120)
  rows = progress()
  begin = _at(rows, first + settle) if first else None
  end = rows[-1] if rows else None
  if not begin or end[0] <= begin[0]:
    raise SystemExit(f'bench/inference.py: {config_name} ({mode}) did not '
                     f'step for --seconds={seconds:g} within --timeout='
                     f'{timeout:g}; see {workdir}/run/logs\n{stderr[-2000:]}')
  result = {'env_steps_per_second': (end[1] - begin[1]) / (end[0] - begin[0]),
            'seconds': end[0] - begin[0]}
  node = batches()
  if mode == 'central' and node:
    first_row, last_row = _at(node, begin[0]) or node[0], node[-1]
    count = last_row[1] - first_row[1]
    if count > 0:
      result['batch_calls'] = (last_row[2] - first_row[2]) / count
      result['batch_rows'] = (last_row[3] - first_row[3]) / count
  return result


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--configs', default='r2d2_atari,impala_atari,dqn_atari')
  parser.add_argument('--seconds', type=float, default=30.0)
  parser.add_argument('--settle', type=float, default=20.0,
                      help='seconds after the first actor steps before '
                      'measuring (compiles, first calls)')
  parser.add_argument('--repeats', type=int, default=1)
  parser.add_argument('--batch_sizes', default='',
                      help='also the node\'s step alone at these batch '
                      'sizes (rows), e.g. 1,2,4,8')
  parser.add_argument('--timeout', type=float, default=600.0)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  parser.add_argument('extra', nargs='*', help='launch flags after --')
  args = parser.parse_args(argv)
  sizes = [int(n) for n in args.batch_sizes.split(',') if n]
  if (args.seconds < 0 or (args.seconds == 0 and not sizes) or
      args.settle < 0 or args.repeats < 1):
    parser.error('--seconds must be positive (0 with --batch_sizes: the '
                 'node alone), --repeats positive, --settle not negative')
  from acme_launch import quiet
  quiet.quiet_third_party()
  print(f'{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}' +
        (f'; {args.seconds:g} s measured after {args.settle:g} s'
         if args.seconds else ''), flush=True)
  results = []
  for name in args.configs.split(',') if sizes else ():
    print(f'{name}: the node\'s step alone', flush=True)
    for rows, ms, cpu_ms in batch_costs(_load_config(name, args.extra),
                                        sizes):
      print(f'  {rows} rows: {ms:.2f} ms a call ({cpu_ms:.2f} CPU ms), '
            f'{number(1e3 * rows / ms)} rows/s', flush=True)
      results.append({'config': name, 'batch_rows': rows, 'call_ms': ms,
                      'call_cpu_ms': cpu_ms})
  header = ('config', 'inference', 'actors x envs', 'env steps/s',
            'batch: calls', 'batch: rows')
  if args.seconds:
    print('  '.join(header), flush=True)
  for name in args.configs.split(',') if args.seconds else ():
    config = _load_config(name, args.extra)
    flags = unlimited(config) + list(args.extra)
    shape = f'{config.num_actors} x {config.envs_per_actor}'
    rates = {mode: [] for mode in MODES}
    for repeat in range(args.repeats):
      for mode in MODES:
        result = measure(name, mode, flags, args.seconds, args.settle,
                         os.path.join(args.out, 'inference'), args.timeout)
        result.update(config=name, inference=mode, repeat=repeat,
                      num_actors=config.num_actors,
                      envs_per_actor=config.envs_per_actor,
                      load_average=os.getloadavg()[0])
        results.append(result)
        rates[mode].append(result['env_steps_per_second'])
        if mode == 'actor':  # One call per actor step, of its envs.
          calls, rows = 1.0, float(config.envs_per_actor)
        else:
          calls, rows = result.get('batch_calls'), result.get('batch_rows')
        print('  '.join((name, mode, shape,
                         number(result['env_steps_per_second']),
                         number(calls, '.2f'), number(rows, '.2f'))),
              flush=True)
    ratio = (sum(rates['central']) / sum(rates['actor'])
             if sum(rates['actor']) else None)
    print(f'{name}: central / actor {number(ratio, ".2f")}x env steps/s',
          flush=True)
    results.append({'config': name, 'central_over_actor': ratio})
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'inference.json'), 'w') as f:
    json.dump({'extra': args.extra, 'cores': os.cpu_count(),
               'results': results}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
