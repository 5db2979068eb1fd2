"""Central inference writes what per-actor inference writes.

Several actors' loops run at once in threads, their policy calls going to
one `InferenceServer` (through a thread pool, as courier's handler threads
call it), which answers them in batches. Their items in Reverb are compared
with those of the same actors each running its own policy
(`BatchedEnvironmentLoop`, `RecurrentBatchedEnvironmentLoop`), item by item:

* feed-forward: a toy policy, deterministic in the observations plus noise
  from the key, on Hopper-v4 (EnvPool and the gym backend), into Acme's
  n-step transition adders: equal items show each actor's rows got its own
  key chain's draws;
* recurrent: the tiny R2D2 and IMPALA networks of
  tests/program/test_recurrent_actor.py on its small tasks (states,
  epsilons, logits and keys per environment, held by the node).

And the real networks of the shipped Atari and MuJoCo configs, stepped on
the same observations by the node (several actors a call) and by each
actor's own policy: equal actions, floats within tolerance.
"""

import concurrent.futures
import threading

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.adders import reverb as adders_reverb
from acme.utils import counting
from acme.utils import loggers
import jax
import jax.numpy as jnp
import launchpad as lp
import numpy as np
import pytest
import reverb
import tree

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch.adders import batched as batched_adders
from acme_launch.program import batched_actor
from acme_launch.program import build
from acme_launch.program import inference
from acme_launch.program import recurrent_actor
from tests.adders import test_batched as test_batched_adders
from tests.program import test_batched_actor
from tests.program import test_recurrent_actor

NUM_ACTORS = 3
ITERATIONS = 80


@pytest.fixture(name='stops')
def _stops(monkeypatch):
  """lp.stop_event() per thread: each actor loop stops on its own."""
  local = threading.local()

  def stop_event():
    if not hasattr(local, 'stop'):
      local.stop = threading.Event()
    return local.stop

  monkeypatch.setattr(lp, 'stop_event', stop_event)
  return stop_event


class _Courier:
  """An inference node's client: each call on a thread of a pool, as
  courier's handler threads run them."""

  def __init__(self, server):
    self._server = server
    self._pool = concurrent.futures.ThreadPoolExecutor(NUM_ACTORS + 2)
    self.futures = self

  def step(self, *args):
    return self._pool.submit(self._server.step, *args)


class _Params:
  """The learner's side of the node's variable client: fixed parameters."""
  params = None

  def __init__(self, params=None):
    self.params = params

  def update(self, wait=False):
    pass

  def update_and_wait(self):
    pass


class _Thread(threading.Thread):
  """Runs `run(stop)` with its own stop event; join() raises what it
  raised."""

  def __init__(self, run, stops):
    super().__init__()
    self._run_it, self._stops, self._error = run, stops, None

  def run(self):
    try:
      self._run_it(self._stops())
    except BaseException as e:  # pylint: disable=broad-except
      self._error = e

  def join(self, timeout=None):
    super().join(timeout)
    if self._error is not None:
      raise self._error


def _in_thread(run, stops):
  thread = _Thread(run, stops)
  thread.start()
  return thread


def _run_central(steps, params, make_loop, stops):
  """Every actor's loop in a thread against one server; returns its
  mean batch size (calls)."""
  server = inference.InferenceServer(steps, _Params(params), NUM_ACTORS,
                                     0.002, loggers.NoOpLogger())
  node = {}

  def serve(stop):
    node['stop'] = stop
    server.run()

  node_thread = _in_thread(serve, stops)
  courier = _Courier(server)

  def act(index):
    def run(stop):
      loop = make_loop(index, courier)
      loop._variable_client = test_batched_actor._Client(ITERATIONS, stop)
      loop._run()
    return run

  threads = [_in_thread(act(i), stops) for i in range(NUM_ACTORS)]
  for thread in threads:
    thread.join()
  node['stop'].set()
  node_thread.join()
  return server._calls / server._batches


def _flush(adder):
  test_batched_actor._flush_all(adder)


# Feed-forward ----------------------------------------------------------------


def _noisy_policy(weights):
  """Deterministic in the observations, plus noise from the key."""
  def policy(params, key, observations):
    del params
    noise = 0.3 * jax.random.normal(key, (observations.shape[0],
                                          weights.shape[1]))
    actions = jnp.sin(50.0 * test_batched_actor.row_product(
        observations, weights)) + noise
    return actions, {'log_prob': observations[:, 0]}
  return policy


def _actor_envs(backend, index):
  seeds = build.env_seeds(100 + index, test_batched_actor.NUM_ENVS)
  return environments.make_environments(test_batched_actor.ENV, seeds, 0,
                                        backend)


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
def test_feed_forward_items_are_those_of_per_actor_inference(backend, stops):
  spec = specs.make_environment_spec(
      environments.make_environment(test_batched_actor.ENV, 0))
  signature = adders_reverb.NStepTransitionAdder.signature(
      spec, {'log_prob': np.ones((), np.float32)})
  servers = [reverb.Server([reverb.Table.queue('t', 100_000,
                                               signature=signature)])
             for _ in range(2)]
  try:
    clients = [reverb.Client(f'localhost:{s.port}') for s in servers]
    make_adder = lambda client: batched_adders.PerEnvAdders(
        [adders_reverb.NStepTransitionAdder(client, n_step=3, discount=0.99,
                                            priority_fns={'t': None})
         for _ in range(test_batched_actor.NUM_ENVS)])
    policy = _noisy_policy(test_batched_actor._weights(spec))
    keys = [jax.random.PRNGKey(1000 + i) for i in range(NUM_ACTORS)]
    adders = []

    def central_loop(index, courier):
      adder = make_adder(clients[0])
      adders.append(adder)
      return inference.CentralInferenceLoop(
          _actor_envs(backend, index), courier, index, adder,
          counting.Counter(prefix='actor'), loggers.NoOpLogger())

    mean_batch = _run_central(
        inference.FeedForwardSteps(policy, np.stack(keys), True), None,
        central_loop, stops)
    for adder in adders:
      _flush(adder)
    for index in range(NUM_ACTORS):  # Each actor with its own policy.
      adder = make_adder(clients[1])
      stop = stops()
      stop.clear()
      loop = batched_actor.BatchedEnvironmentLoop(
          _actor_envs(backend, index), policy,
          test_batched_actor._Client(ITERATIONS, stop), adder, keys[index],
          counting.Counter(prefix='actor'), loggers.NoOpLogger(),
          policy_returns_extras=True)
      loop._run()
      _flush(adder)
    read = lambda client: sorted(test_batched_adders._read_all(client, 't'),
                                 key=test_batched_adders._key)
    mine, theirs = read(clients[0]), read(clients[1])
    assert len(theirs) >= NUM_ACTORS * test_batched_actor.NUM_ENVS * (
        ITERATIONS - 10)
    test_batched_actor._assert_same(mine, theirs)
    assert mean_batch > 1.2  # Calls of several actors in one batch.
  finally:
    for server in servers:
      server.stop()


# Recurrent -------------------------------------------------------------------


@pytest.mark.parametrize('agent', ['r2d2/gym', 'impala/gym'], indirect=True,
                         ids=['r2d2', 'impala'])
def test_recurrent_items_are_those_of_per_actor_inference(agent, stops):
  _, _, config, adapter, builder, networks, params, clients = agent
  policy = adapter.make_policy(config, networks, None, evaluation=False)
  core = adapter.make_actor_core(config, networks, policy)
  num_envs = len(test_recurrent_actor.LENGTHS)
  seeds = [build.env_seeds(200 + i, num_envs) for i in range(NUM_ACTORS)]
  keys = [np.stack([jax.random.PRNGKey(s) for s in actor_seeds])
          for actor_seeds in seeds]
  make_envs = lambda: environments.PythonEnvironments(
      [test_recurrent_actor._Task(n) for n in test_recurrent_actor.LENGTHS])
  make_adder = lambda client: batched_adders.PerEnvAdders(
      [builder.make_adder(client) for _ in range(num_envs)])
  adders = []

  def central_loop(index, courier):
    adder = make_adder(clients[0])
    adders.append(adder)
    return inference.CentralInferenceLoop(
        make_envs(), courier, index, adder,
        counting.Counter(prefix='actor'), loggers.NoOpLogger())

  mean_batch = _run_central(
      inference.RecurrentSteps(core, np.concatenate(keys), num_envs), params,
      central_loop, stops)
  for adder in adders:
    _flush(adder)
  for index in range(NUM_ACTORS):
    adder = make_adder(clients[1])
    stop = stops()
    stop.clear()
    client = test_batched_actor._Client(ITERATIONS, stop)
    client.params = params
    loop = recurrent_actor.RecurrentBatchedEnvironmentLoop(
        make_envs(), core, client, adder, keys[index],
        counting.Counter(prefix='actor'), loggers.NoOpLogger())
    loop._run()
    _flush(adder)
  mine = test_recurrent_actor._items(clients[0])
  theirs = test_recurrent_actor._items(clients[1])
  assert len(theirs) >= NUM_ACTORS * ITERATIONS // 3
  test_recurrent_actor.assert_same_items(mine, theirs)
  assert mean_batch > 1.2


agent = test_recurrent_actor._agent  # The fixture: tiny networks, servers.


# The real networks -----------------------------------------------------------


def _shipped(config_name, **fields):
  from acme_launch.config import registry
  config = registry.load(config_name)
  for name, value in fields.items():
    config[name] = value
  return config


def _spec(config):
  return specs.make_environment_spec(environments.make_environment(
      config.env_name, seed=0, backend=config.env_backend, config=config))


def _observations(spec, rows, seed):
  rng = np.random.default_rng(seed)
  shape = (rows,) + spec.observations.shape
  if spec.observations.dtype == np.uint8:
    return rng.integers(0, 256, shape, np.uint8)
  return rng.normal(0, 1, shape).astype(spec.observations.dtype)


def _assert_close(mine, theirs):
  for x, y in zip(tree.flatten(mine), tree.flatten(theirs)):
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape and x.dtype == y.dtype
    if np.issubdtype(x.dtype, np.floating):
      np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    else:
      np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize('config_name', ['dqn_atari', 'ppo_mujoco'])
def test_feed_forward_networks_act_as_each_actors_own_policy(config_name):
  """Ape-X's epsilons (DQN) and PPO's sampled actions and log-probs: each
  actor's rows from one batched call equal its own policy's."""
  config = _shipped(config_name, envpool_async_envs=0)
  adapter = agents.load(config.agent)
  spec = _spec(config)
  networks = adapter.make_networks(config, spec)
  init = getattr(networks, 'init', None) or networks.network.init
  params = init(jax.random.PRNGKey(0))
  rows = 4
  keys = np.stack([jax.random.PRNGKey(i) for i in range(NUM_ACTORS)])
  inputs = None
  if adapter.actor_policy_inputs:
    config.envs_per_actor = rows
    inputs = [adapter.actor_policy_inputs(config, i)
              for i in range(NUM_ACTORS)]
    node_policy = adapter.make_policy(config, networks, spec, False)
  else:
    node_policy = agents.make_actor_policy(adapter, config, networks, spec, 0)
  steps = inference.FeedForwardSteps(node_policy, keys,
                                     adapter.policy_returns_extras, inputs)
  own = []
  for i in range(NUM_ACTORS):
    loop = batched_actor.BatchedEnvironmentLoop(
        None, agents.make_actor_policy(adapter, config, networks, spec, i),
        None, None, keys[i], None, None,
        policy_returns_extras=adapter.policy_returns_extras)
    own.append(loop)
  for step in range(3):
    observations = [_observations(spec, rows, 10 * step + i)
                    for i in range(NUM_ACTORS)]
    actors = [0, 2] if step == 1 else range(NUM_ACTORS)  # Not all, once.
    results = steps(params, [(i, observations[i], np.arange(rows),
                              np.zeros(rows, bool)) for i in actors])
    for i, (actions, extras) in zip(actors, results):
      loop = own[i]
      loop._random_key, output = loop._policy_step(
          params, loop._random_key, observations[i])
      own_actions, own_extras = batched_actor.actions_and_extras(
          output, adapter.policy_returns_extras)
      _assert_close((actions, extras), (own_actions, own_extras))


@pytest.mark.parametrize('config_name', ['r2d2_atari', 'impala_atari'])
def test_recurrent_networks_act_as_each_actors_own_core(config_name):
  """R2D2's LSTM states and epsilons, IMPALA's states and logits: rows of
  several actors in one call equal each actor's own batched step."""
  config = _shipped(config_name)
  adapter = agents.load(config.agent)
  spec = _spec(config)
  networks = adapter.make_networks(config, spec)
  policy = adapter.make_policy(config, networks, spec, False)
  core = adapter.make_actor_core(config, networks, policy)
  key = jax.random.PRNGKey(7)
  if config.agent == 'impala':
    params = networks.unroll_init_fn(key, networks.initial_state_fn(
        networks.initial_state_init_fn(key)))
  else:
    state = networks.initial_state.apply(
        networks.initial_state.init(key, 1), key, 1)
    params = networks.forward.init(
        key, jnp.zeros((1,) + spec.observations.shape,
                       spec.observations.dtype), state)
  keys = [np.stack([jax.random.PRNGKey(100 * i)]) for i in range(NUM_ACTORS)]
  steps = inference.RecurrentSteps(core, np.concatenate(keys), 1)
  step = jax.jit(recurrent_actor.make_step(core), backend='cpu')
  own = [[k, jax.vmap(core.init)(jnp.asarray(k))] for k in keys]
  for t in range(4):
    observations = [_observations(spec, 1, 10 * t + i)
                    for i in range(NUM_ACTORS)]
    first = np.array([t == 0])
    actors = [1, 2] if t == 2 else range(NUM_ACTORS)
    results = steps(params, [(i, observations[i], np.zeros(1, np.int64),
                              first) for i in actors])
    for i, (actions, extras) in zip(actors, results):
      own[i][0], own[i][1], own_actions, own_extras = step(
          params, own[i][0], own[i][1], observations[i],
          np.zeros(1, np.int64), first)
      _assert_close((actions, extras), (np.asarray(own_actions),
                                        tree.map_structure(np.asarray,
                                                           own_extras)))
