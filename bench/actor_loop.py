"""The batched actor loop alone, in one process, against its env ceiling.

    .venv/bin/python bench/actor_loop.py [--envs=16,64] [--seconds=10]
        [--repeats=3] [--backend=envpool] [--async_factors=2] [--env_threads=1]
        [--profile=PATH]

`ppo_mujoco`'s actor as the launcher builds it (its PPO policy with
observation normalization, its variable client, its batched writer) steps
HalfCheetah-v4 into a local Reverb server whose table is PPO's queue
signature, sized so it never fills (no learner: what is measured is the
loop). Each figure is printed next to the backend's one-thread ceiling at
the same number of envs, measured in the same run just before it
(bench/throughput.py's ceilings: EnvPool's own dm_env `step` with random
actions, nothing of acme-launch; gym's env.step() per env). `--profile`
writes a cProfile of the last repeat of each cell (PATH.N.FACTOR.prof) and
prints its top entries. `--async_factors=2` also runs EnvPool's async mode
with 2N environments of which each step receives N. `--env_threads`: EnvPool's
worker threads (the launcher gives a pinned actor one per core; run under
`taskset` to pin this process as the plan would).
"""

import argparse
import cProfile
import os
import pstats
import sys
import threading
import time

os.environ['JAX_PLATFORMS'] = 'cpu'
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from acme_launch import quiet
quiet.quiet_third_party()  # Before TF, JAX or Reverb are imported.
from acme_launch import compat
from acme import core
from acme import specs
from acme.utils import counting
from acme.utils import loggers
import jax
import launchpad as lp
import reverb

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch.program import batched_actor
import throughput  # bench/throughput.py: its ceilings.
from acme_launch.configs import ppo_mujoco

ENV_NAME = 'HalfCheetah-v4'


class _Source(core.VariableSource):
  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


class _NullLogger(loggers.Logger):
  def write(self, data):
    pass

  def close(self):
    pass


CPU_US = [0.0, 0.0]
CEILING_CPU_US = [0.0]
_STOP = threading.Event()
# The loop asks Launchpad for its stop event; outside a program, one of ours.
lp.stop_event = lambda: _STOP


def actor_steps_per_second(num_envs: int, seconds: float, backend: str,
                           async_envs: int = 0, profile: str = '',
                           env_threads: int = 1) -> float:
  """`ppo_mujoco`'s batched actor, alone: env steps/s over `seconds`."""
  config = ppo_mujoco.get_config()
  config.envs_per_actor = num_envs
  adapter = agents.load('ppo')
  spec = specs.make_environment_spec(
      environments.make_environment(ENV_NAME, seed=0))
  builder = adapter.make_builder(config, learner_logger_fn=lambda: None,
                                 environment_spec=spec)
  signature = builder.replay_signature(spec)
  # Room for every sequence of the run: the loop never waits on a learner.
  server = reverb.Server([reverb.Table.queue(
      builder._config.replay_table_name,
      max_size=2_000_000, signature=signature)])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    networks = adapter.make_networks(config, spec)
    params = networks.network.init(jax.random.PRNGKey(0))
    policy = adapter.make_policy(config, networks, spec, evaluation=False)
    kwargs = {'async_envs': async_envs} if async_envs else {}
    envs = environments.make_environments(
        ENV_NAME, list(range(num_envs)), 0, backend, num_threads=env_threads,
        **kwargs)
    adder = builder.make_batched_adder(client, spec, envs.num_envs)
    loop = batched_actor.BatchedEnvironmentLoop(
        envs, policy, agents.make_variable_client(adapter, config,
                                                  _Source(params)),
        adder, jax.random.PRNGKey(0),
        counting.Counter(prefix='actor', time_delta=0.), _NullLogger(),
        max_actor_steps=20 * num_envs, policy_returns_extras=True)
    loop._run()  # warm-up: jit, writes
    deadline = time.time() + seconds
    steps = [0]
    counter_increment = loop._counter.increment

    def increment(**kwargs):
      steps[0] += kwargs.get('steps', 0)
      counts = counter_increment(**kwargs)
      if time.time() >= deadline:  # Ends the loop: a budget just reached.
        loop._max_actor_steps = 1
      return counts

    loop._counter.increment = increment
    loop._max_actor_steps = 0
    start = time.time()
    cpu, main_cpu = time.process_time(), time.thread_time()
    profiler = cProfile.Profile() if profile else None
    if profiler:
      profiler.enable()
    loop._run()
    if profiler:
      profiler.disable()
      profiler.dump_stats(profile)
    rate = steps[0] / (time.time() - start)
    main_cpu = time.thread_time() - main_cpu
    cpu = time.process_time() - cpu
    # CPU microseconds per env step: this (Python) thread's, and the
    # other threads' (EnvPool's worker, Reverb's writer).
    CPU_US[:] = [1e6 * main_cpu / steps[0], 1e6 * (cpu - main_cpu) / steps[0]]
    adder.close()
    close = getattr(envs, 'close', None)
    if close:
      close()
    return rate
  finally:
    server.stop()


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--envs', default='16,64')
  parser.add_argument('--seconds', type=float, default=10.0)
  parser.add_argument('--ceiling_seconds', type=float, default=5.0)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--backend', default='envpool')
  parser.add_argument('--async_factors', default='',
                      help='also EnvPool async mode with FACTOR x envs '
                      'environments of which each step gets envs, e.g. 2')
  parser.add_argument('--env_threads', type=int, default=1,
                      help="EnvPool's worker threads in the actor")
  parser.add_argument('--profile', default='')
  args = parser.parse_args(argv)
  print(f'load average {os.getloadavg()[0]:.1f}; this process may use '
        f'{len(os.sched_getaffinity(0))} of {os.cpu_count()} cores; EnvPool '
        f'worker threads {args.env_threads}', flush=True)
  factors = [int(f) for f in args.async_factors.split(',') if f]
  for num_envs in [int(n) for n in args.envs.split(',')]:
    for repeat in range(args.repeats):
      cpu = time.process_time()
      if args.backend == 'envpool':
        ceiling = throughput.raw_envpool_steps_per_second(
            args.ceiling_seconds, num_envs)
      else:
        ceiling = throughput.raw_env_steps_per_second(args.ceiling_seconds)
      # The ceiling's CPU time (all its threads) per env step.
      CEILING_CPU_US[0] = 1e6 * (time.process_time() - cpu) / (
          ceiling * args.ceiling_seconds)
      for factor in [0] + factors:
        profile = (f'{args.profile}.{num_envs}.{factor}.prof'
                   if args.profile and repeat == args.repeats - 1 else '')
        rate = actor_steps_per_second(num_envs, args.seconds, args.backend,
                                      factor * num_envs, profile,
                                      args.env_threads)
        mode = f'async {factor * num_envs} envs' if factor else 'sync'
        print(f'{args.backend} {num_envs} envs a step ({mode}): actor '
              f'{rate:,.0f} env steps/s; ceiling {ceiling:,.0f}: '
              f'{100 * rate / ceiling:.0f}% (load {os.getloadavg()[0]:.1f}); '
              f'CPU us/env step: loop thread {CPU_US[0]:.1f}, other threads '
              f'{CPU_US[1]:.1f}; ceiling {CEILING_CPU_US[0]:.1f}', flush=True)
        if profile:
          pstats.Stats(profile).sort_stats('tottime').print_stats(15)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
