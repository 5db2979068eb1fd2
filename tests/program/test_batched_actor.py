"""The actor loop of arrays writes what Acme's own adders write.

`BatchedEnvironmentLoop` runs real Hopper-v4 environments (EnvPool sync,
EnvPool async, and the gym backend) under a deterministic policy that makes
Hopper fall within tens of steps, so episodes end and (on EnvPool) restart
on the following step. Its items in Reverb are compared with the items of a
reference that steps the same environments by hand with dm_env TimeStep
objects, one Acme adder per environment: PPO's sequences (through
`BatchedSequenceAdder` and through `PerEnvAdders`) and off-policy n-step
transitions (`PerEnvAdders` of Acme's NStepTransitionAdder).
"""

import threading

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.adders import reverb as adders_reverb
from acme.utils import counting
from acme.utils import loggers
import dm_env
import envpool
import jax
import jax.numpy as jnp
import launchpad as lp
import numpy as np
import pytest
import reverb

from acme_launch import envs as environments
from acme_launch.program import batched_actor
from acme_launch.adders import batched as batched_adders
from tests.adders import test_batched as test_batched_adders

ENV = 'Hopper-v4'
NUM_ENVS = 3
ITERATIONS = 150
SEED = 5


def _weights(spec):
  return np.random.default_rng(3).normal(
      0, 1, (spec.observations.shape[0], spec.actions.shape[0])).astype(
          np.float32)


def row_product(observations, weights):
  """`observations @ weights` as products and a sum per row. A matrix
  product's kernels round a row differently with the batch's size on some
  CPUs (numpy's and XLA's on AVX2 hosts); this rounds each row alone, so an
  environment's actions are the same bits in a batch of any size, and the
  chaotic streams below (a rounding apart, Hopper soon moves apart) stay
  comparable item by item."""
  return jnp.sum(observations[..., :, None] * weights, axis=-2)


def _policy(weights):
  """Deterministic, but far from smooth: Hopper falls fast."""
  def policy(params, key, observations):
    del params, key
    actions = jnp.sin(50.0 * row_product(observations, weights))
    return actions, {'log_prob': observations[:, 0]}
  return policy


def _numpy_policy(weights, observations):
  actions, extras = jax.jit(_policy(weights))(None, None, observations)
  return np.asarray(actions), {'log_prob': np.asarray(extras['log_prob'])}


class _Client:
  """A variable client that stops the loop after `iterations` updates (the
  loop updates once an iteration)."""

  def __init__(self, iterations, stop):
    self.params, self._left, self._stop = None, iterations, stop

  def update_and_wait(self):
    pass

  def update(self):
    self._left -= 1
    if not self._left:
      self._stop.set()


def _run_loop(envs, adder, weights, iterations, monkeypatch):
  stop = threading.Event()
  monkeypatch.setattr(lp, 'stop_event', lambda: stop)
  loop = batched_actor.BatchedEnvironmentLoop(
      envs, _policy(weights), _Client(iterations, stop), adder,
      np.zeros(2, np.uint32), counting.Counter(prefix='actor'),
      loggers.NoOpLogger(), policy_returns_extras=True)
  loop._run()
  if hasattr(adder, 'close'):  # Waits for the server to confirm each item.
    adder.close()
  else:
    _flush_all(adder)


def _flush_all(per_env):
  for adder in per_env._adders:
    adder._writer.flush()


def _reference(backend, num_envs, weights, iterations, adders):
  """The environments stepped by hand, dm_env objects to Acme's adders, as
  one actor per environment would write them."""
  if backend == 'envpool':
    pool = envpool.make_dm(ENV, num_envs=num_envs, batch_size=num_envs,
                           seed=SEED, num_threads=1)
    low, high = pool.action_spec().minimum, pool.action_spec().maximum
    ids = np.arange(num_envs, dtype=np.int32)
    batch = pool.reset()
    timesteps = [dm_env.restart(batch.observation.obs[i].astype(np.float32))
                 for i in range(num_envs)]
    for i, timestep in enumerate(timesteps):
      adders[i].add_first(timestep)
    for _ in range(iterations):
      observations = np.stack([t.observation for t in timesteps])
      actions, extras = _numpy_policy(weights, observations)
      scaled = low + (np.clip(actions, -1, 1) + 1) * 0.5 * (high - low)
      batch = pool.step(scaled, ids)
      for i in range(num_envs):
        observation = batch.observation.obs[i].astype(np.float32)
        if batch.step_type[i] == dm_env.StepType.FIRST:  # Auto-reset.
          timesteps[i] = dm_env.restart(observation)
          adders[i].add_first(timesteps[i])
          continue
        timesteps[i] = dm_env.TimeStep(
            dm_env.StepType(batch.step_type[i]), np.float32(batch.reward[i]),
            np.float32(batch.discount[i]), observation)
        adders[i].add(actions[i], timesteps[i],
                      extras={'log_prob': extras['log_prob'][i]})
    return
  envs = [environments.make_environment(ENV, seed=SEED + i)
          for i in range(num_envs)]
  timesteps = [env.reset() for env in envs]
  for i, timestep in enumerate(timesteps):
    adders[i].add_first(timestep)
  for _ in range(iterations):
    observations = np.stack([t.observation for t in timesteps])
    actions, extras = _numpy_policy(weights, observations)
    for i, env in enumerate(envs):
      timesteps[i] = env.step(actions[i])
      adders[i].add(actions[i], timesteps[i],
                    extras={'log_prob': extras['log_prob'][i]})
      if timesteps[i].last():
        timesteps[i] = env.reset()
        adders[i].add_first(timesteps[i])


@pytest.fixture(name='ppo')
def _ppo():
  spec = specs.make_environment_spec(environments.make_environment(ENV, 0))
  _, builder = test_batched_adders._ppo_builder(spec)
  table = builder.make_replay_tables(spec)[0]
  servers = [reverb.Server(builder.make_replay_tables(spec)) for _ in range(2)]
  clients = [reverb.Client(f'localhost:{s.port}') for s in servers]
  yield spec, builder, table, clients
  for server in servers:
    server.stop()


def _items(client, table):
  read = test_batched_adders._read_all
  return sorted(read(client, table), key=test_batched_adders._key)


def _assert_same(mine, theirs):
  assert len(mine) == len(theirs)
  for a, b in zip(mine, theirs):
    assert len(a) == len(b)
    for x, y in zip(a, b):
      assert x.dtype == y.dtype and x.shape == y.shape
      np.testing.assert_array_equal(x, y)


def _make_envs(backend, num_envs, async_envs=0):
  seeds = [SEED + i for i in range(num_envs)]
  return environments.make_environments(ENV, seeds, 0, backend,
                                        async_envs=async_envs)


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
@pytest.mark.parametrize('writer', ['batched', 'per_env'])
def test_loop_writes_acme_sequence_adder_items(ppo, backend, writer,
                                               monkeypatch):
  """PPO sequences: episode ends (final rows), EnvPool's auto-reset steps
  (not written) and the gym backend's immediate resets."""
  spec, builder, table, clients = ppo
  weights = _weights(spec)
  if writer == 'batched':
    adder = builder.make_batched_adder(clients[0], spec, NUM_ENVS)
  else:
    adder = batched_adders.PerEnvAdders(
        [builder.make_adder(clients[0]) for _ in range(NUM_ENVS)])
  envs = _make_envs(backend, NUM_ENVS)
  _run_loop(envs, adder, weights, ITERATIONS, monkeypatch)
  reference = [builder.make_adder(clients[1]) for _ in range(NUM_ENVS)]
  _reference(backend, NUM_ENVS, weights, ITERATIONS, reference)
  for adder in reference:
    adder._writer.flush()
  mine, theirs = (_items(c, table.name) for c in clients)
  # Episodes of a few tens of steps: many ends and restarts in the items.
  starts = sum(int(np.sum(item[4])) for item in theirs)
  assert starts > 3 * NUM_ENVS
  assert len(theirs) >= NUM_ENVS * ITERATIONS // 16
  _assert_same(mine, theirs)


def test_async_envpool_streams_are_the_sync_streams(ppo, monkeypatch):
  """EnvPool's async mode: 2N environments, N a step, whichever are ready.
  Each environment's stream (its own actions on its own observations) is
  the same as in sync mode: every item is one of the sync run's."""
  spec, builder, table, clients = ppo
  weights = _weights(spec)
  envs = _make_envs('envpool', NUM_ENVS, async_envs=2 * NUM_ENVS)
  assert envs.num_envs == 2 * NUM_ENVS and envs.batch_size == NUM_ENVS
  adder = builder.make_batched_adder(clients[0], spec, 2 * NUM_ENVS)
  _run_loop(envs, adder, weights, ITERATIONS, monkeypatch)
  # Sync, all 2N, as long as it takes every environment past its async steps.
  reference = [builder.make_adder(clients[1]) for _ in range(2 * NUM_ENVS)]
  _reference('envpool', 2 * NUM_ENVS, weights, ITERATIONS, reference)
  for adder in reference:
    adder._writer.flush()
  mine, theirs = (_items(c, table.name) for c in clients)
  keys = {test_batched_adders._key(item) for item in theirs}
  assert len(mine) >= NUM_ENVS * ITERATIONS // 16
  assert all(test_batched_adders._key(item) in keys for item in mine)


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
def test_loop_writes_acme_transition_adder_items(backend, monkeypatch):
  """Off-policy agents: per-env views of the arrays to Acme's n-step
  transition adders, one per environment."""
  spec = specs.make_environment_spec(environments.make_environment(ENV, 0))
  signature = adders_reverb.NStepTransitionAdder.signature(
      spec, {'log_prob': np.ones((), np.float32)})
  # A queue: reading every item back takes each once.
  tables = lambda: [reverb.Table.queue('t', 100_000, signature=signature)]
  servers = [reverb.Server(tables()) for _ in range(2)]
  try:
    clients = [reverb.Client(f'localhost:{s.port}') for s in servers]
    make = lambda client: adders_reverb.NStepTransitionAdder(
        client, n_step=3, discount=0.99, priority_fns={'t': None})
    weights = _weights(spec)
    adder = batched_adders.PerEnvAdders(
        [make(clients[0]) for _ in range(NUM_ENVS)])
    _run_loop(_make_envs(backend, NUM_ENVS), adder, weights, ITERATIONS,
              monkeypatch)
    reference = [make(clients[1]) for _ in range(NUM_ENVS)]
    _reference(backend, NUM_ENVS, weights, ITERATIONS, reference)
    for each in reference:
      each._writer.flush()
    mine, theirs = (_items(c, 't') for c in clients)
    assert len(theirs) >= NUM_ENVS * (ITERATIONS - 10)
    _assert_same(mine, theirs)
  finally:
    for server in servers:
      server.stop()
