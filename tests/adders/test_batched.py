"""The batched PPO writer puts exactly Acme's SequenceAdder items in Reverb.

Three real Hopper-v4 environments (random actions, so episodes end at
different steps and the streams fall out of step) are fed, step for step,
to Acme's own adders (one per environment, from the PPO builder) on one
Reverb server and to `BatchedSequenceAdder` on another; both servers hold
the PPO builder's own queue table. Every item is then read back from both
and compared field by field.
"""

import numpy as np
import pytest
import reverb

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme_launch import agents
from acme_launch.adders import batched as batched_adders
from acme_launch import envs as environments
from acme_launch.configs import ppo_mujoco

NUM_ENVS = 3
NUM_STEPS = 400


def _ppo_builder(spec):
  config = ppo_mujoco.get_config()
  config.ppo.unroll_length = 8
  config.ppo.max_queue_batches = 8   # 8 x 128 sequences: room for all items.
  return config, agents.load('ppo').make_builder(
      config, learner_logger_fn=lambda: None, environment_spec=spec)


def _read_all(client, table):
  """Every item in the queue, as tuples of arrays in signature order."""
  size = client.server_info()[table].current_size
  samples = client.sample(table, num_samples=size, emit_timesteps=False,
                          unpack_as_table_signature=True)
  return [tuple(np.asarray(x) for x in _flatten(sample.data))
          for sample in samples]


def _flatten(data):
  import tree
  return tree.flatten(data)


def _key(item):
  return b''.join(np.ascontiguousarray(x).tobytes() for x in item)


@pytest.fixture(name='servers')
def _servers():
  envs = [environments.make_environment('Hopper-v4', seed=s)
          for s in range(NUM_ENVS)]
  spec = specs.make_environment_spec(envs[0])
  _, builder = _ppo_builder(spec)
  stock_server = reverb.Server(builder.make_replay_tables(spec))
  ours_server = reverb.Server(builder.make_replay_tables(spec))
  yield envs, spec, builder, stock_server, ours_server
  stock_server.stop()
  ours_server.stop()


def test_same_items_as_acme_sequence_adder(servers):
  envs, spec, builder, stock_server, ours_server = servers
  table = builder.make_replay_tables(spec)[0]
  stock_client = reverb.Client(f'localhost:{stock_server.port}')
  ours_client = reverb.Client(f'localhost:{ours_server.port}')
  stock = [builder.make_adder(stock_client) for _ in envs]
  ours = batched_adders.BatchedSequenceAdder(
      ours_client, table.name, table.info.signature, NUM_ENVS)

  rng = np.random.default_rng(0)
  timesteps = [env.reset() for env in envs]
  for i, timestep in enumerate(timesteps):
    stock[i].add_first(timestep)
    ours.add_first(i, timestep)
  episode_ends = 0
  for _ in range(NUM_STEPS):
    actions = rng.uniform(spec.actions.minimum, spec.actions.maximum,
                          (NUM_ENVS,) + spec.actions.shape).astype(np.float32)
    extras = {'log_prob': rng.normal(size=NUM_ENVS).astype(np.float32)}
    timesteps = [env.step(a) for env, a in zip(envs, actions)]
    for i, timestep in enumerate(timesteps):
      stock[i].add(actions[i], timestep,
                   extras={'log_prob': extras['log_prob'][i]})
    ours.add(actions, timesteps, extras)
    for i, timestep in enumerate(timesteps):
      if timestep.last():
        episode_ends += 1
        timesteps[i] = envs[i].reset()
        stock[i].add_first(timesteps[i])
        ours.add_first(i, timesteps[i])
  for adder in stock:
    adder._writer.flush()
  ours.close()

  # Random Hopper falls within tens of steps: many, unaligned episode ends.
  assert episode_ends > 10
  stock_items = _read_all(stock_client, table.name)
  ours_items = _read_all(ours_client, table.name)
  # About NUM_ENVS * (NUM_STEPS + episode ends) / 8 windows.
  assert len(stock_items) > NUM_ENVS * NUM_STEPS // 8
  assert len(ours_items) == len(stock_items)
  stock_sorted = sorted(stock_items, key=_key)
  ours_sorted = sorted(ours_items, key=_key)
  for theirs, mine in zip(stock_sorted, ours_sorted):
    assert len(theirs) == len(mine)
    for a, b in zip(theirs, mine):
      assert a.dtype == b.dtype and a.shape == b.shape
      np.testing.assert_array_equal(a, b)


def test_without_final_rows_each_episode_ends_on_its_last_step(servers):
  """`final_rows=False`: per environment, the rows are its steps alone (no
  final-observation row), the last of each episode with discount 0, cut
  into windows of sequence_length every sequence_length - 1 rows."""
  envs, spec, builder, _, server = servers
  table = builder.make_replay_tables(spec)[0]
  client = reverb.Client(f'localhost:{server.port}')
  ours = batched_adders.BatchedSequenceAdder(
      client, table.name, table.info.signature, NUM_ENVS, final_rows=False)
  length = int(table.info.signature.start_of_episode.shape[0])

  rng = np.random.default_rng(2)
  streams = [[] for _ in envs]   # Each env's rows, as the reference.
  timesteps = [env.reset() for env in envs]
  starts = [True] * NUM_ENVS
  for i, timestep in enumerate(timesteps):
    ours.add_first(i, timestep)
  truncated = 0
  for _ in range(NUM_STEPS):
    actions = rng.uniform(spec.actions.minimum, spec.actions.maximum,
                          (NUM_ENVS,) + spec.actions.shape).astype(np.float32)
    log_probs = rng.normal(size=NUM_ENVS).astype(np.float32)
    stepped = [env.step(a) for env, a in zip(envs, actions)]
    ours.add(actions, stepped, {'log_prob': log_probs})
    for i, timestep in enumerate(stepped):
      # Signature order: observation, action, reward, discount,
      # start_of_episode, extras['log_prob'].
      streams[i].append((timesteps[i].observation, actions[i],
                         timestep.reward,
                         0.0 if timestep.last() else timestep.discount,
                         starts[i], log_probs[i]))
      starts[i] = False
      timesteps[i] = timestep
      if timestep.last():
        truncated += timestep.discount > 0
        timesteps[i] = envs[i].reset()
        starts[i] = True
        ours.add_first(i, timesteps[i])
  ours.close()

  items = _read_all(client, table.name)
  expected = []
  for rows in streams:
    for begin in range(0, len(rows) - length + 1, length - 1):
      window = rows[begin:begin + length]
      expected.append(tuple(
          np.asarray([row[k] for row in window], field.dtype)
          for k, field in enumerate(items[0])))
  assert len(items) == len(expected) > NUM_ENVS * NUM_STEPS // length
  for mine, theirs in zip(sorted(items, key=_key), sorted(expected, key=_key)):
    for a, b in zip(mine, theirs):
      np.testing.assert_array_equal(a, b)
  assert truncated == 0  # Random Hopper falls long before its time limit.
