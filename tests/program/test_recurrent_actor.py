"""The recurrent batched actor writes what N separate Acme actors write.

`RecurrentBatchedEnvironmentLoop` steps N environments with the agent's
actor core (the adapter's `make_actor_core`), one recurrent state and key
chain per environment, into one Acme SequenceAdder per environment. The
reference is N Acme actors (same parameters, same keys), stepped one by
one, each with its own adder on a second Reverb server: for R2D2 those
`R2D2Builder.make_actor` makes (its behaviour policy: an epsilon drawn per
episode, random actions at that rate); for IMPALA, Acme's GenericActor over
the same core (it samples from the logits). Every item in the two tables,
the `core_state` (and IMPALA's `logits`) extras included, is compared.

Environments: three small deterministic dm_env tasks whose episodes last
3, 7 and 5 steps (the gym backend's immediate resets, through
`reset_some`), and EnvPool's CartPole-v1 (auto-reset first steps; its
async mode against its sync mode).
"""

import threading

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.adders import reverb as adders_reverb
from acme.agents.jax import actors
from acme.jax import variable_utils
from acme.utils import counting
from acme.utils import loggers
import dm_env
import jax
import jax.numpy as jnp
import launchpad as lp
import numpy as np
import pytest
import reverb

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch.configs import impala_minatar
from acme_launch.configs import r2d2_minatar
from acme_launch.adders import batched as batched_adders
from acme_launch.program import recurrent_actor
from tests.program import test_batched_actor
from tests.adders import test_batched as test_batched_adders

LENGTHS = (3, 7, 5)  # Episode lengths of the three small tasks.
# Steps of each environment: CartPole's episodes last tens of steps.
ITERATIONS = {'gym': 60, 'envpool': 200}
SEEDS = (11, 12, 13)  # Consecutive: EnvPool seeds environment i with 11 + i.


class _Task(dm_env.Environment):
  """Episodes of `length` steps; observations tell the step and the task
  apart; the reward is 1 when the action is the step number mod 3."""

  def __init__(self, length: int):
    self._length, self._t = length, 0

  def _observation(self):
    return np.array([self._t / self._length, np.sin(self._t + self._length),
                     self._length / 10.0], np.float32)

  def reset(self):
    self._t = 0
    return dm_env.restart(self._observation())

  def step(self, action):
    reward = np.float32(int(action) == self._t % 3)
    self._t += 1
    if self._t == self._length:
      return dm_env.TimeStep(dm_env.StepType.LAST, reward, np.float32(0.0),
                             self._observation())
    return dm_env.transition(reward, self._observation(), np.float32(1.0))

  def observation_spec(self):
    return specs.Array((3,), np.float32)

  def action_spec(self):
    return specs.DiscreteArray(3)

  def reward_spec(self):
    return specs.Array((), np.float32)

  def discount_spec(self):
    return specs.BoundedArray((), np.float32, 0.0, 1.0)


def _config(agent):
  if agent == 'impala':
    config = impala_minatar.get_config()
    config.impala.sequence_length = 5  # A new one every 4 steps.
    config.network.lstm_size = 8
    return config
  config = r2d2_minatar.get_config()
  config.r2d2.burn_in_length, config.r2d2.trace_length = 2, 3  # 6 steps
  config.r2d2.sequence_period = 2
  config.network.lstm_size = 8
  config.network.head_hidden_layers = (8,)
  return config


class _Source:
  """The learner's side of the variable client: fixed parameters."""

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


def _make_envs(backend):
  if backend == 'envpool':
    return environments.make_environments('CartPole-v1', list(SEEDS), 0,
                                          'envpool')
  return environments.PythonEnvironments([_Task(n) for n in LENGTHS])


@pytest.fixture(name='agent')
def _agent(request):
  """(agent, backend, config, adapter, builder, networks, params, clients)
  for `request.param`, 'agent/backend'."""
  agent, backend = request.param.split('/')
  spec = specs.make_environment_spec(
      _Task(3) if backend == 'gym' else
      environments.make_environment('CartPole-v1', 0, backend='envpool'))
  config = _config(agent)
  adapter = agents.load(agent)
  builder = adapter.make_builder(config, lambda: None, spec)
  networks = adapter.make_networks(config, spec)
  signature = builder.make_replay_tables(spec)[0].info.signature
  # A queue under the adders' table name: reading it back takes each item
  # once.
  tables = lambda: [reverb.Table.queue(adders_reverb.DEFAULT_PRIORITY_TABLE,
                                       100_000, signature=signature)]
  servers = [reverb.Server(tables()) for _ in range(2)]
  clients = [reverb.Client(f'localhost:{s.port}') for s in servers]
  key = jax.random.PRNGKey(7)
  if agent == 'impala':
    params = networks.unroll_init_fn(key, networks.initial_state_fn(
        networks.initial_state_init_fn(key)))
  else:
    state = networks.initial_state.apply(
        networks.initial_state.init(key, 1), key, 1)
    params = networks.forward.init(
        key, jnp.zeros((1,) + spec.observations.shape,
                       spec.observations.dtype), state)
  yield agent, backend, config, adapter, builder, networks, params, clients
  for server in servers:
    server.stop()


def _key(agent, seed):
  """The key the reference actor of `seed` starts its chain from
  (R2D2Builder.make_actor splits its key three ways)."""
  key = jax.random.PRNGKey(seed)
  return key if agent == 'impala' else jax.random.split(key, 3)[2]


def _acme_actor(agent, config, adapter, builder, networks, params, seed,
                adder):
  policy = adapter.make_policy(config, networks, None, evaluation=False)
  if agent == 'r2d2':
    return builder.make_actor(jax.random.PRNGKey(seed), policy, adder=adder,
                              variable_source=_Source(params))
  client = variable_utils.VariableClient(_Source(params), 'network')
  return actors.GenericActor(
      adapter.make_actor_core(config, networks, policy), _key(agent, seed),
      client, adder=adder, backend='cpu')


def _run_ours(agent, backend, config, adapter, builder, networks, params,
              client, monkeypatch, envs=None):
  stop = threading.Event()
  monkeypatch.setattr(lp, 'stop_event', lambda: stop)
  policy = adapter.make_policy(config, networks, None, evaluation=False)
  envs = envs or _make_envs(backend)
  adder = batched_adders.PerEnvAdders(
      [builder.make_adder(client) for _ in range(envs.num_envs)])
  keys = np.stack([_key(agent, SEEDS[0] + i) for i in range(envs.num_envs)])
  client = test_batched_actor._Client(ITERATIONS[backend], stop)
  client.params = params
  loop = recurrent_actor.RecurrentBatchedEnvironmentLoop(
      envs, adapter.make_actor_core(config, networks, policy), client, adder,
      keys, counting.Counter(prefix='actor'), loggers.NoOpLogger())
  loop._run()
  test_batched_actor._flush_all(adder)


def _run_acme(agent, backend, config, adapter, builder, networks, params,
              client):
  """N Acme actors, one per environment, stepped in turn; the same
  environments, driven by hand."""
  envs = _make_envs(backend)
  acme_actors = [_acme_actor(agent, config, adapter, builder, networks,
                             params, s, builder.make_adder(client))
                 for s in SEEDS]
  timesteps = envs.reset()
  observations = [None] * envs.num_envs
  for row, i in enumerate(timesteps.env_id):
    acme_actors[i].observe_first(timesteps.timestep(row))
    observations[i] = timesteps.observation[row]
  episodes = 0
  for _ in range(ITERATIONS[backend]):
    actions = np.stack([actor.select_action(observation) for actor,
                        observation in zip(acme_actors, observations)])
    envs.send(actions, np.arange(envs.num_envs))
    timesteps = envs.recv()
    for row, i in enumerate(timesteps.env_id):
      timestep = timesteps.timestep(row)
      if timestep.first():  # EnvPool restarted it instead of stepping it.
        acme_actors[i].observe_first(timestep)
      else:
        acme_actors[i].observe(actions[i], timestep)
      if timestep.last() and not envs.auto_reset:
        timestep = envs.reset_one(i)
        acme_actors[i].observe_first(timestep)
      episodes += timestep.first()
      observations[i] = timestep.observation
  for actor in acme_actors:
    actor._adder._writer.flush()
  return episodes


# An item's fields in signature order: the step's observation, action,
# reward, discount and start_of_episode, then the extras the network made
# (core_state, and IMPALA's logits).
STEP_FIELDS = 5


def _step_key(item):
  """The item's steps: what the environments and the actions wrote."""
  return test_batched_adders._key(item[:STEP_FIELDS])


def _items(client):
  read = test_batched_adders._read_all
  items = read(client, adders_reverb.DEFAULT_PRIORITY_TABLE)
  return sorted(items, key=lambda item: (_step_key(item),
                                         test_batched_adders._key(item)))


def _same(mine, theirs):
  """The steps equal; the extras equal to float32 rounding: the LSTM's
  matrix products round a row differently with the batch's size on some
  CPUs (AVX2 hosts), and the batches here are 1, N or any actors' rows."""
  if len(mine) != len(theirs) or _step_key(mine) != _step_key(theirs):
    return False
  for x, y in zip(mine[STEP_FIELDS:], theirs[STEP_FIELDS:]):
    if x.dtype != y.dtype or x.shape != y.shape or not np.allclose(
        x, y, rtol=1e-5, atol=1e-6):
      return False
  return True


def assert_same_items(mine, theirs):
  """`mine` and `theirs` (each as `_items` sorts them) hold the same items,
  as `_same` says, failing where they differ."""
  assert len(mine) == len(theirs)
  for a, b in zip(mine, theirs):
    assert len(a) == len(b)
    test_batched_actor._assert_same([a[:STEP_FIELDS]], [b[:STEP_FIELDS]])
    for x, y in zip(a[STEP_FIELDS:], b[STEP_FIELDS:]):
      assert x.dtype == y.dtype and x.shape == y.shape
      np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def assert_each_is_one_of(mine, theirs):
  """Every item of `mine` is one of `theirs`'."""
  by_steps = {}
  for item in theirs:
    by_steps.setdefault(_step_key(item), []).append(item)
  for item in mine:
    assert any(_same(item, other)
               for other in by_steps.get(_step_key(item), ()))


@pytest.mark.parametrize(
    'agent', ['r2d2/gym', 'r2d2/envpool', 'impala/gym', 'impala/envpool'],
    indirect=True)
def test_items_are_those_of_one_acme_actor_per_environment(agent,
                                                           monkeypatch):
  *setup, clients = agent
  _run_ours(*setup, clients[0], monkeypatch)
  episodes = _run_acme(*setup, clients[1])
  assert episodes > 2 * len(SEEDS)  # Many, unaligned restarts.
  mine, theirs = _items(clients[0]), _items(clients[1])
  # At least one (padded) sequence an episode.
  assert len(theirs) >= episodes
  assert_same_items(mine, theirs)


@pytest.mark.parametrize('agent', ['r2d2/envpool'], indirect=True)
def test_async_envpool_streams_are_the_sync_streams(agent, monkeypatch):
  """EnvPool's async mode: 2N environments, N a step, whichever are ready,
  so the rows of a step are any environments' and their states are picked
  out and put back by environment id. Each environment's stream is the
  same as in sync mode: every item is one of the sync run's."""
  *setup, clients = agent
  num_envs = 2 * len(SEEDS)
  envs = environments.make_environments('CartPole-v1', list(SEEDS), 0,
                                        'envpool', async_envs=num_envs)
  assert envs.num_envs == num_envs and envs.batch_size == len(SEEDS)
  _run_ours(*setup, clients[0], monkeypatch, envs)
  # Sync, all 2N, each stepped as often as the async run stepped all.
  _run_ours(*setup, clients[1], monkeypatch, environments.make_environments(
                'CartPole-v1', [SEEDS[0] + i for i in range(num_envs)], 0,
                'envpool'))
  mine, theirs = _items(clients[0]), _items(clients[1])
  assert len(mine) >= num_envs
  assert_each_is_one_of(mine, theirs)


@pytest.mark.parametrize('agent', ['r2d2/gym'], indirect=True)
def test_each_environment_state_restarts_at_its_own_episode_start(
    agent, monkeypatch):
  """Rows of each item, against the network run by hand: a row that starts
  an episode holds the LSTM state after the initial state saw its
  observation; any other row, the state after the previous row's state saw
  its observation. The tasks end at different steps, so one environment
  restarts while the others go on."""
  *setup, clients = agent
  _run_ours(*setup, clients[0], monkeypatch)
  networks, params = setup[5:7]
  initial = networks.initial_state.apply(
      networks.initial_state.init(jax.random.PRNGKey(0), 1), None, 1)
  forward = jax.jit(lambda o, s: networks.forward.apply(params, None, o, s)[1])
  items = test_batched_adders._read_all(
      clients[0], adders_reverb.DEFAULT_PRIORITY_TABLE)
  # Signature order: observation, action, reward, discount,
  # start_of_episode, extras core_state (hidden, cell).
  starts = 0
  for observation, _, _, discount, start, hidden, cell in items:
    for t in range(observation.shape[0]):
      if t and not start[t] and discount[t - 1] == 0:
        continue  # The final row of an episode: zeros, no state.
      if start[t]:
        before = initial
      elif t:
        before = type(initial)(hidden=hidden[t - 1][None],
                               cell=cell[t - 1][None])
      else:
        continue  # The state before the item's first row is not in it.
      starts += bool(start[t])
      after = forward(observation[t][None], before)
      np.testing.assert_allclose(hidden[t], after.hidden[0], rtol=1e-5,
                                 atol=1e-6)
      np.testing.assert_allclose(cell[t], after.cell[0], rtol=1e-5,
                                 atol=1e-6)
  assert starts > 3 * len(SEEDS)


@pytest.mark.parametrize('agent', ['impala/gym'], indirect=True)
def test_impala_state_restarts_at_each_environment_episode_start(
    agent, monkeypatch):
  """IMPALA's extras, against the network run by hand: a row's
  `core_state` is the LSTM state before its step (IMPALAActor's), the
  initial state where an episode starts, else the state after the previous
  row's state saw the previous observation; its `logits` are the network's
  on its observation from that state. The tasks end at different steps, so
  one environment restarts while the others go on."""
  *setup, clients = agent
  _run_ours(*setup, clients[0], monkeypatch)
  networks, params = setup[5:7]
  initial = networks.initial_state_fn(
      networks.initial_state_init_fn(jax.random.PRNGKey(0)))
  forward = jax.jit(lambda o, s: networks.forward_fn(params, o, s))
  items = test_batched_adders._read_all(
      clients[0], adders_reverb.DEFAULT_PRIORITY_TABLE)
  # Signature order: observation, action, reward, discount,
  # start_of_episode, extras core_state (hidden, cell) and logits.
  starts = 0
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  for observation, _, _, discount, start, hidden, cell, logits in items:
    for t in range(observation.shape[0]):
      if t and not start[t] and discount[t - 1] == 0:
        continue  # The final row of an episode: zeros, no state.
      state = type(initial)(hidden=hidden[t], cell=cell[t])
      if start[t]:
        starts += 1
        close(hidden[t], initial.hidden)
        close(cell[t], initial.cell)
      elif t:
        _, after = forward(observation[t - 1], type(initial)(
            hidden=hidden[t - 1], cell=cell[t - 1]))
        close(hidden[t], after.hidden)
        close(cell[t], after.cell)
      (step_logits, _), _ = forward(observation[t], state)
      close(logits[t], step_logits)
  assert starts > 3 * len(SEEDS)
