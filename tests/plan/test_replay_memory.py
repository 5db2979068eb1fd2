"""The replay node's memory estimate: its arithmetic, its limits, its lines,
and the estimate against a real Reverb server filled as R2D2's actors fill
it."""

import collections
import os

import numpy as np
import pytest

from acme_launch import errors
from acme_launch.plan import replay_memory as rm
from acme_launch.testing import bench as bench_scripts

Spec = collections.namedtuple('Spec', 'observations actions rewards discounts')
Array = collections.namedtuple('Array', 'shape dtype')

ATARI = Spec(Array((4, 84, 84), np.uint8), Array((), np.int32),
             Array((), np.float32), Array((), np.float32))
MUJOCO = Spec(Array((17,), np.float32), Array((6,), np.float32),
              Array((), np.float32), Array((), np.float32))
FIELDS = ('config.r2d2.max_replay_size', 'config.r2d2.sequence_period')


def r2d2_layout(max_size=1000, length=49, period=20, lstm=512):
  state = {'core_state': {'hidden': rm.Column('', (lstm,), 'float32'),
                          'cell': rm.Column('', (lstm,), 'float32')}}
  return rm.sequence_layout('priority_table', max_size, ATARI, length, period,
                            FIELDS, extras=state)


def test_columns_flatten_nested_specs_and_find_pixels():
  layout = r2d2_layout(lstm=8)
  by_path = {c.path: c for c in layout.columns}
  assert set(by_path) == {
      'observation', 'action', 'reward', 'discount', 'start_of_episode',
      'extras.core_state.cell', 'extras.core_state.hidden'}
  assert by_path['observation'].nbytes == 4 * 84 * 84
  assert by_path['observation'].pixel
  assert not by_path['extras.core_state.hidden'].pixel  # float32
  assert by_path['extras.core_state.hidden'].nbytes == 8 * 4
  assert not rm.Column('x', (84, 84), 'float32').pixel
  assert not rm.Column('x', (84,), 'uint8').pixel   # a vector of bytes


def test_overlapping_sequences_store_each_step_once():
  layout = r2d2_layout(max_size=1000, length=49, period=20)
  table = rm.estimate_table(layout)
  # 1000 items a period of 20 apart, plus the first item's extra 29 steps.
  assert table.stored_steps == 1000 * 20 + 29
  raw = sum(c.nbytes for c in layout.columns)
  pixel = 4 * 84 * 84
  per_step = (pixel / rm.PIXEL_COMPRESSION +
              (raw - pixel) / rm.VECTOR_COMPRESSION +
              len(layout.columns) * rm.COLUMN_STEP_OVERHEAD_BYTES)
  assert table.raw_bytes_per_step == raw
  assert table.bytes_per_step == pytest.approx(per_step)
  assert table.bytes == pytest.approx(
      table.stored_steps * per_step + 1000 * rm.ITEM_OVERHEAD_BYTES)
  # Halving the period halves what a full table stores, about.
  half = rm.estimate_table(r2d2_layout(max_size=1000, period=10))
  assert half.bytes == pytest.approx(table.bytes / 2, rel=0.05)


def test_transitions_store_one_step_per_item():
  layout = rm.transition_layout('priority_table', 5000, MUJOCO, 5,
                                ('config.sac.max_replay_size',))
  table = rm.estimate_table(layout)
  assert table.stored_steps == 5000 + 5
  # Observation, action, reward, discount, start, n-step return, discount.
  assert len(layout.columns) == 7
  assert table.raw_bytes_per_step == 17 * 4 + 6 * 4 + 4 + 4 + 1 + 4 + 4


def test_the_estimate_adds_the_process_and_names_its_fields():
  estimate = rm.estimate([r2d2_layout(), rm.transition_layout(
      'other', 10, MUJOCO, 1, ('config.r2d2.max_replay_size', 'config.x'))])
  assert estimate.bytes == pytest.approx(
      rm.PROCESS_BASELINE_MB * 2**20 + sum(t.bytes for t in estimate.tables))
  assert estimate.fields == FIELDS + ('config.x',)


def test_checkpoints_add_room_in_proportion_to_the_tables():
  layouts = [r2d2_layout(), rm.transition_layout('other', 10, MUJOCO, 1, ())]
  without = rm.estimate(layouts)
  with_room = rm.estimate(layouts, checkpoints=True)
  tables = sum(t.bytes for t in without.tables)
  assert without.checkpoint_bytes == 0
  assert with_room.checkpoint_bytes == pytest.approx(rm.CHECKPOINT_ROOM * tables)
  assert with_room.bytes == pytest.approx(without.bytes + rm.CHECKPOINT_ROOM *
                                          tables)
  # The process's own baseline is not checkpointed.
  assert with_room.baseline_bytes == without.baseline_bytes


def test_the_dry_run_lines_show_the_checkpoint_room_and_how_to_drop_it():
  estimate = rm.estimate([r2d2_layout(max_size=50_000)], checkpoints=True)
  lines = rm.format_plan(rm.ReplayPlan(estimate, host_bytes=64 * 10**9)
                         ).splitlines()
  assert lines[0].startswith(f'replay/0 memory: about '
                             f'{estimate.bytes / 1e9:,.1f} GB when full')
  assert lines[2] == (
      f'  + room for its checkpoints, about '
      f'{estimate.checkpoint_bytes / 1e9:,.1f} GB '
      f'({rm.CHECKPOINT_ROOM:.0%} of the tables; '
      '--config.checkpoint.replay=false drops it)')
  assert lines[3].startswith('  + the process itself')
  no_room = rm.format_plan(rm.ReplayPlan(rm.estimate([r2d2_layout()])))
  assert 'checkpoints' not in no_room


def test_a_refusal_counts_the_checkpoint_room_and_names_the_switch():
  layout = r2d2_layout(max_size=100_000)
  estimate = rm.estimate([layout], checkpoints=True)
  # Fits without the room, not with it.
  host = int(rm.estimate([layout]).bytes) + 2**20
  message = _one_line_error(rm.ReplayPlan(estimate, host_bytes=host))
  assert f'about {estimate.bytes / 1e9:,.1f} GB' in message
  assert (f'{estimate.checkpoint_bytes / 1e9:,.1f} GB of room for its '
          'checkpoints, --config.checkpoint.replay=false drops it') in message
  rm.check(rm.ReplayPlan(rm.estimate([layout]), host_bytes=host))


def _one_line_error(replay):
  with pytest.raises(errors.LaunchError) as raised:
    rm.check(replay)
  message = str(raised.value)
  assert '\n' not in message
  return message


def test_a_replay_larger_than_the_host_is_refused_with_its_fields():
  estimate = rm.estimate([r2d2_layout(max_size=10_000_000)])
  message = _one_line_error(rm.ReplayPlan(estimate, host_bytes=16 * 2**30))
  assert f'about {estimate.bytes / 1e9:,.1f} GB' in message
  assert "this host's memory 17.2 GB" in message
  assert '10,000,000 items x 20 new steps' in message
  assert ('lower --config.r2d2.max_replay_size, '
          '--config.r2d2.sequence_period') in message
  rm.check(rm.ReplayPlan(estimate, host_bytes=int(estimate.bytes) + 1))


def test_a_replay_over_its_ray_reservation_is_refused():
  estimate = rm.estimate([r2d2_layout(max_size=100_000)])
  limit_mb = int(estimate.bytes / 2**20 / 2)
  message = _one_line_error(rm.ReplayPlan(estimate, limit_mb=limit_mb))
  assert f'--config.resources.replay.ray_memory_mb={limit_mb}' in message
  assert message.endswith(
      ', or raise --config.resources.replay.ray_memory_mb')
  rm.check(rm.ReplayPlan(estimate, limit_mb=limit_mb * 3))
  rm.check(rm.ReplayPlan(estimate))  # No limit known: nothing to refuse.


def test_the_dry_run_lines_show_the_estimate_next_to_the_limits():
  estimate = rm.estimate([r2d2_layout(max_size=50_000)])
  text = rm.format_plan(rm.ReplayPlan(estimate, limit_mb=40_000,
                                      host_bytes=64 * 10**9))
  first = text.splitlines()[0]
  assert first == (f'replay/0 memory: about {estimate.bytes / 1e9:,.1f} GB '
                   'when full, of limit 41.9 GB '
                   '(--config.resources.replay.ray_memory_mb) and '
                   "this host's memory 64.0 GB")
  assert "table 'priority_table': 50,000 items x 20 new steps" in text
  assert '--config.r2d2.max_replay_size' in text


def test_host_memory_is_read_from_meminfo(tmp_path):
  meminfo = tmp_path / 'meminfo'
  meminfo.write_text('MemTotal:       16384 kB\nMemFree: 1 kB\n')
  assert rm.host_memory_bytes(str(meminfo)) == 16384 * 1024
  assert rm.host_memory_bytes(str(tmp_path / 'none')) is None
  assert rm.host_memory_bytes() > 0  # This machine's.


def test_the_estimate_matches_a_real_reverb_server_filled_like_r2d2():
  """A real Reverb server in its own process, filled by Acme's own
  SequenceAdder (as R2D2's builder makes it) with real Pong frames and the
  LSTM state of a small R2D2 network: its memory growth against the
  estimate the r2d2 adapter's tables give for the items it holds."""
  bench = bench_scripts.load('replay_memory')
  from acme_launch import compat
  from acme import specs
  from acme_launch import agents
  from acme_launch.config import registry

  config = registry.load('r2d2_atari')
  config.r2d2.burn_in_length, config.r2d2.trace_length = 4, 10  # 15 steps
  config.r2d2.sequence_period = 5
  config.network.conv_channels, config.network.conv_kernels = (4,), (8,)
  config.network.conv_strides, config.network.lstm_size = (8,), 64
  pong = bench.make_env('atari:Pong', 'envpool')
  spec = specs.make_environment_spec(pong)
  steps, warmup = 3000, 300
  measured = bench.measure_growth(
      bench.sequence_adder(15, 5),
      bench.env_steps(pong, steps + warmup, seed=1,
                      extras_fn=bench.r2d2_states(config, spec)), warmup)
  assert measured['items'] == pytest.approx(steps / 5, rel=0.05)
  config.r2d2.max_replay_size = measured['items']
  (layout,) = agents.load('r2d2').replay_tables(config, spec)
  estimated = rm.estimate_table(layout).bytes
  # Within 35%: RSS moves with the allocator, not only with the data.
  assert estimated == pytest.approx(measured['growth_bytes'], rel=0.35), (
      estimated, measured)


def test_the_launch_plans_checkpoint_room_only_with_replay_checkpoints(
    tmp_path):
  from acme_launch import prepare
  argv = ['launch.py', '--config=dqn_cartpole', f'--workdir={tmp_path}']
  on = prepare.check_arguments(argv).replay.estimate
  off = prepare.check_arguments(
      argv + ['--config.checkpoint.replay=false']).replay.estimate
  assert off.checkpoint_bytes == 0
  assert on.checkpoint_bytes == pytest.approx(
      rm.CHECKPOINT_ROOM * sum(t.bytes for t in on.tables))
  assert on.tables == off.tables
  assert os.listdir(tmp_path) == []  # A dry run: nothing written.


def test_the_checkpoint_room_covers_a_real_server_checkpointing_pong():
  """A real Reverb server with Reverb's checkpointer, a full table of DQN's
  3-step transitions of Pong frames written by Acme's own adder, checkpointed
  three times (a fifth new before each) as the replay node does: its memory
  while writing, and after, stays within the room the dqn adapter's table
  gets for checkpoints."""
  bench = bench_scripts.load('replay_memory')
  from acme_launch import compat
  from acme import specs
  from acme_launch import agents
  from acme_launch.config import registry

  items = 10_000
  pong = bench.make_env('atari:Pong', 'envpool')
  measured = bench.measure_checkpoints(
      bench.transitions_adder(3), bench.env_steps(pong, 2**62, seed=3),
      items, rounds=3)
  config = registry.load('dqn_atari')
  config.dqn.max_replay_size = items
  (layout,) = agents.load('dqn').replay_tables(
      config, specs.make_environment_spec(pong))
  room = rm.estimate([layout], checkpoints=True).checkpoint_bytes
  full = measured['full_rss_bytes']
  assert max(measured['rss_peak_during_checkpoint_bytes']) - full <= room, (
      room, measured)
  assert measured['rss_after_checkpoint_bytes'][-1] - full <= room, measured
