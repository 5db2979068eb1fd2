"""The replay node's memory estimate: its arithmetic, its limits, its lines,
and the estimate against a real Reverb server filled as R2D2's actors fill
it."""

import collections
import os
import sys

import numpy as np
import pytest

from acme_launch import errors
from acme_launch.plan import replay_memory as rm

from tests.conftest import REPO_ROOT

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
  sys.path.insert(0, os.path.join(REPO_ROOT, 'bench'))
  import replay_memory as bench  # pylint: disable=g-import-not-at-top
  from acme_launch import compat  # pylint: disable=g-import-not-at-top,unused-import
  from acme import specs  # pylint: disable=g-import-not-at-top
  from acme_launch import agents  # pylint: disable=g-import-not-at-top
  from acme_launch.config import registry  # pylint: disable=g-import-not-at-top

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
