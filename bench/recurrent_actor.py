"""A recurrent agent's actor alone, one process: env steps/s by environments
per actor.

    .venv/bin/python bench/recurrent_actor.py [--config=r2d2_minatar]
        [--envs=1,4,8] [--seconds=20] [-- EXTRA CONFIG FLAGS]

The config's actor as the launcher builds it: with one environment, Acme's
own actor (R2D2's, IMPALA's) and environment loop; with N > 1, the batched
recurrent actor (program/recurrent_actor.py) with one Acme SequenceAdder
per environment. Both write into a local Reverb table of the agent's
signature that
drops its oldest sequences and never blocks (no learner: what is measured
is the actor). Each setting is timed over `--seconds` after its first 200
steps (jit, first writes); prints env steps/s per setting, and env steps
per CPU second of the process (Reverb's server included): the figure to
compare on a machine where other work takes cores.
"""

import argparse
import gc
import os
import sys
import threading
import time
from typing import Tuple

os.environ['JAX_PLATFORMS'] = 'cpu'
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from acme_launch import quiet
quiet.quiet_third_party()  # Before TF, JAX or Reverb are imported.
from acme_launch import compat
from acme import core
from acme import environment_loop
from acme import specs
from acme.adders import reverb as adders_reverb
from acme.utils import counting
from acme.utils import loggers
import jax
import jax.numpy as jnp
import launchpad as lp
import numpy as np
import reverb

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch import prepare
from acme_launch.adders import batched as batched_adders
from acme_launch.program import recurrent_actor

_STOP = threading.Event()
lp.stop_event = lambda: _STOP  # Outside a program: one of ours.


class _Source(core.VariableSource):

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


class _Clock(counting.Counter):
  """Counts steps; starts the clock once `warmup` steps are counted (jit,
  first writes done) and reports the budget reached `seconds` later."""

  def __init__(self, warmup: int, seconds: float):
    super().__init__(prefix='actor', time_delta=0.)
    self._warmup, self._seconds = warmup, seconds
    self.steps, self.start, self.end = 0, None, float('inf')

  def increment(self, **counts):
    self.steps += counts.get('steps', 0)
    result = super().increment(**counts)
    now = time.time()
    if self.start is None and self.steps >= self._warmup:
      self.start, self.start_steps = now, self.steps
      self.start_cpu = time.process_time()
      self.end = now + self._seconds
    if now >= self.end:
      result = dict(result, actor_steps=float('inf'))
    return result

  def rate(self):
    """(env steps per second, env steps per CPU second of this process)."""
    steps = self.steps - self.start_steps
    return (steps / (time.time() - self.start),
            steps / (time.process_time() - self.start_cpu))


def _params(config, networks, spec, key):
  """Parameters of the agent's network (r2d2 or impala), at random."""
  if config.agent == 'impala':
    return networks.unroll_init_fn(key, networks.initial_state_fn(
        networks.initial_state_init_fn(key)))
  state = networks.initial_state.apply(
      networks.initial_state.init(key, 1), key, 1)
  return networks.forward.init(
      key, jnp.zeros((1,) + spec.observations.shape, spec.observations.dtype),
      state)


def steps_per_second(config, num_envs: int,
                     seconds: float) -> Tuple[float, float]:
  adapter = agents.load(config.agent)
  spec = specs.make_environment_spec(
      environments.make_environment(config.env_name, 0, config=config))
  builder = adapter.make_builder(config, lambda: None, spec)
  signature = builder.make_replay_tables(spec)[0].info.signature
  server = reverb.Server([reverb.Table(
      adders_reverb.DEFAULT_PRIORITY_TABLE, reverb.selectors.Uniform(),
      reverb.selectors.Fifo(), max_size=2000,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)])
  try:
    rate = _measure(adapter, config, spec, builder,
                    reverb.Client(f'localhost:{server.port}'), num_envs,
                    seconds)
    # The adders are gone (their writers closed) before their server is:
    # a writer left open waits 10 s to flush into a stopped server.
    gc.collect()
    return rate
  finally:
    server.stop()


def _measure(adapter, config, spec, builder, client, num_envs: int,
             seconds: float) -> Tuple[float, float]:
  """(env steps/s, env steps per CPU second) of one actor stepping
  `num_envs` environments."""
  networks = adapter.make_networks(config, spec)
  key = jax.random.PRNGKey(0)
  params = _params(config, networks, spec, key)
  policy = adapter.make_policy(config, networks, spec, evaluation=False)
  clock = _Clock(warmup=200, seconds=seconds)
  if num_envs == 1:  # Acme's own actor and loop, as the launcher runs it.
    actor = builder.make_actor(key, policy, adder=builder.make_adder(client),
                               variable_source=_Source(params))
    loop = environment_loop.EnvironmentLoop(
        environments.make_environment(config.env_name, 0, config=config),
        actor, clock, loggers.NoOpLogger())
    while time.time() < clock.end:
      loop.run(num_episodes=1)
    return clock.rate()
  envs = environments.make_environments(
      config.env_name, list(range(num_envs)), 0, 'gym', config=config)
  loop = recurrent_actor.RecurrentBatchedEnvironmentLoop(
      envs, adapter.make_actor_core(config, networks, policy),
      agents.make_variable_client(adapter, config, _Source(params)),
      batched_adders.PerEnvAdders(
          [builder.make_adder(client) for _ in range(num_envs)]),
      np.stack([jax.random.PRNGKey(i) for i in range(num_envs)]),
      clock, loggers.NoOpLogger(), max_actor_steps=10**12)
  loop._run()  # until the clock stops
  return clock.rate()


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config', default='r2d2_minatar')
  parser.add_argument('--envs', default='1,4,8')
  parser.add_argument('--seconds', type=float, default=20.0)
  args, extra = parser.parse_known_args(argv[1:])
  extra = [a for a in extra if a != '--']
  config = prepare.check_arguments(
      ['launch.py', f'--config={args.config}', *extra]).config
  if config.agent not in ('r2d2', 'impala'):
    print(f'bench/recurrent_actor.py: config.agent must be r2d2 or impala, '
          f'got {config.agent!r}', file=sys.stderr)
    return 2
  for num_envs in [int(n) for n in args.envs.split(',')]:
    rate, cpu_rate = steps_per_second(config, num_envs, args.seconds)
    print(f'{args.config} envs_per_actor={num_envs}: {rate:,.0f} env steps/s '
          f'({cpu_rate:,.0f} per CPU second)', flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
