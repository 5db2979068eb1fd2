"""A learner on several devices, in process (agents/devices.py): the
IMPALA and R2D2 builders batch their datasets by `batch_size / N` from a
real Reverb table, keep their tables as with one device, and refuse a batch
that does not split. The runs on two virtual CPU devices are in
tests/e2e/agents/test_devices.py."""

import jax
import ml_collections
import numpy as np
import pytest
import reverb
import tree

from acme_launch import compat  # JAX aliases; before acme
from acme_launch import agents
from acme_launch import envs as environments
from acme_launch import errors
from acme_launch.agents import devices
from acme_launch.config import registry
from acme import specs


def _tiny(agent: str, num_devices: int, batch_size: int):
  config = registry.load(f'{agent}_minatar')
  config.network.conv_channels, config.network.lstm_size = (4,), 8
  if agent == 'impala':
    config.impala.sequence_length, config.impala.max_queue_size = LENGTH, 32
  else:
    config.r2d2.burn_in_length, config.r2d2.trace_length = 1, 3
    config.r2d2.min_replay_size, config.r2d2.max_replay_size = 4, 64
    # A wide rate limiter: sampled at will once 4 are in.
    config.r2d2.samples_per_insert = 1.0
    config.r2d2.samples_per_insert_tolerance_rate = 10.0
  config[agent].batch_size = batch_size
  config.resources.learner.num_devices = num_devices
  return config


def _spec(config):
  return specs.make_environment_spec(
      environments.make_environment(config.env_name, seed=0))


LENGTH = 5  # Steps a sequence: IMPALA's sequence_length, R2D2's 1 + 3 + 1.


def _fill(client: reverb.Client, table: reverb.Table, items: int,
          length: int = LENGTH) -> None:
  """`items` all-zero sequences of `length` steps, as the table's
  signature has them."""
  signature = table.info.signature
  step = tree.map_structure(
      lambda s: np.zeros(s.shape[1:], s.dtype.as_numpy_dtype), signature)
  with client.trajectory_writer(num_keep_alive_refs=length) as writer:
    for _ in range(items):
      for _ in range(length):
        writer.append(step)
      writer.create_item(table.name, 1.0, tree.map_structure(
          lambda column: column[-length:], writer.history))
    writer.flush()


def _recorded(iterator, sizes):
  """`iterator`'s samples, each one's batch size appended to `sizes`."""
  for sample in iterator:
    sizes.append(sample.data.observation.shape[0])
    yield sample


def test_the_batch_is_split_over_the_learners_devices():
  config = ml_collections.ConfigDict(
      {'resources': {'learner': {'num_devices': 4}}})
  assert devices.num_devices(config) == 4
  assert devices.per_device_batch(config, 'impala', 32) == 8
  with pytest.raises(errors.LaunchError) as raised:
    devices.per_device_batch(config, 'r2d2', 6)
  assert str(raised.value) == (
      "config.r2d2.batch_size=6 does not split over the learner's 4 devices "
      '(config.resources.learner.num_devices): make it a multiple of 4')


@pytest.mark.parametrize('agent', ['impala', 'r2d2'])
def test_each_device_gets_its_share_of_the_batch_and_the_tables_stay(agent):
  """Acme's learner takes one dataset batch per device: with 2 devices
  and batch_size 4 its dataset yields batches of 2 (a step trains on 4,
  2 on each), Acme's learner is built and steps on them, and the replay's
  tables (rate limiter included) are those of one device. (This process
  has one device: the learner pmaps over it.)"""
  adapter = agents.load(agent)
  batches, tables = {}, {}
  for num_devices in (1, 2):
    config = _tiny(agent, num_devices, batch_size=4)
    spec = _spec(config)
    builder = adapter.make_builder(config, lambda: None, spec)
    (table,) = builder.make_replay_tables(spec)
    tables[num_devices] = table.info
    server = reverb.Server([table])
    try:
      client = reverb.Client(f'localhost:{server.port}')
      # IMPALA's queue takes a batch and a sequence before it waits for
      # the learner (its rate limiter's error buffer).
      _fill(client, table, 4 if agent == 'impala' else 8)
      sizes = batches.setdefault(num_devices, [])
      learner = builder.make_learner(
          jax.random.PRNGKey(0), adapter.make_networks(config, spec),
          _recorded(builder.make_dataset_iterator(client), sizes), client)
      learner.step()
      assert sizes, 'the learner stepped on no batch'
    finally:
      server.stop()
  assert {n: sizes[0] for n, sizes in batches.items()} == {1: 4, 2: 2}
  assert tables[1].rate_limiter_info == tables[2].rate_limiter_info
  assert tables[1].max_size == tables[2].max_size


@pytest.mark.parametrize('agent', ['impala', 'r2d2'])
def test_a_batch_that_does_not_split_is_one_line_before_launch(agent):
  config = _tiny(agent, num_devices=2, batch_size=3)
  with pytest.raises(errors.LaunchError) as raised:
    agents.load(agent).make_builder(config, lambda: None, _spec(config))
  assert str(raised.value) == (
      f"config.{agent}.batch_size=3 does not split over the learner's 2 "
      'devices (config.resources.learner.num_devices): make it a multiple '
      'of 2')
