"""The replay node's memory, estimated from the config before launch.

Pixel replay is large: a million Atari steps are 28 GB of raw uint8 frames.
A replay that does not fit its node or host dies (or swaps) hours into a run,
when its tables fill; here the size is planned instead. Each agent's adapter
declares its replay tables (`replay_tables(config, environment_spec)`, see
agents/adapter.py): per table the items it holds at most, what one step
stores (shapes and dtypes, from the environment spec and the agent), how
many steps an item spans and how many new steps each item adds.

How Reverb 0.7 stores them (Acme's adders write through its
TrajectoryWriter): every column's steps are cut into chunks, each chunk
compressed (zstd) and sent once; items refer to chunks, so steps that
overlapping items share (R2D2's sequences a `sequence_period` apart, the
observation and next observation of n-step transitions) are stored once. A
full table of N items that each add P new steps thus holds about N * P steps
(plus one item's span at its ends). Each item, and each column of each
stored step (its share of the chunks), also costs a fixed overhead, which
outweighs small vector steps. Checkpointing the tables (Reverb's
checkpointer, `config.checkpoint.replay`) leaves the server holding more
than its data. The estimate is

    baseline + (1 + CHECKPOINT_ROOM if checkpoints else 1) * sum over tables of
        stored steps * (pixel bytes / PIXEL_COMPRESSION
                        + other bytes / VECTOR_COMPRESSION
                        + columns * COLUMN_STEP_OVERHEAD_BYTES)
        + items * ITEM_OVERHEAD_BYTES

with the ratios and overheads measured on a real Reverb server below.
Nothing here imports acme, Reverb, TensorFlow or JAX.
"""

import dataclasses
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from acme_launch import errors

# Measured by `nice -n 19 .venv/bin/python bench/replay_memory.py`
# (20,000 steps a fill) on 2026-11-25, a 2-core x86-64 VM with other work
# running: a real Reverb 0.7.0 server in its own process, filled through
# Acme's own NStepTransitionAdder and SequenceAdder, its resident memory
# (RSS) growth against the raw bytes of the steps it stores (the bench's
# docstring has the four fills and how they separate the figures).
# Pixel: EnvPool Pong-v5 frame stacks as the `atari` family gives them
# (4x84x84 uint8, random play) in R2D2's delta-encoded sequences: 15.9x.
PIXEL_COMPRESSION = 15.9
# Vector: R2D2's LSTM state (float32, r2d2_atari's network stepped on those
# frames). Floats do not compress, and the server holds them at about 1.8
# times their raw size: a ratio below 1.
VECTOR_COMPRESSION = 0.56
# Per item: its key, priority, chunk references and table bookkeeping
# (HalfCheetah-v4 steps as transitions, an item a step, and as sequences).
ITEM_OVERHEAD_BYTES = 1_981
# Per stored step of each column: its share of its chunks' protos, keys and
# the server's index of them (Acme's adders flush at every item, so chunks
# stay short). Outweighs small vector steps: SAC's HalfCheetah transition
# of 109 raw bytes takes about 3.4 KB.
COLUMN_STEP_OVERHEAD_BYTES = 181
# The server process before any data: Python, acme and Reverb (with TF)
# imported, the server started with an empty table: 438 MiB.
PROCESS_BASELINE_MB = 438
# Reverb's checkpoints (`config.checkpoint.replay`): while one is written,
# the server holds more than its tables, and glibc kept much of what the
# write freed until the replay node began handing it back after each
# checkpoint (node/memory.py). The room a checkpoint takes at its highest,
# as a fraction of the tables' own memory, measured by
# `nice -n 19 .venv/bin/python bench/replay_memory.py` on 2026-11-26 (eight
# checkpoints of a full table, a fifth of it new before each): 100,000 Pong
# frame stacks as 3-step transitions 30%, 5,000 R2D2 sequences of them 11%,
# 100,000 HalfCheetah-v4 1-step transitions (item-heavy) 43%, and 61% for
# 200,000 of those (the bench's `measure_checkpoints`). The largest, for
# every table.
CHECKPOINT_ROOM = 0.6

_GB = 1e9
_ITEMSIZE = {'bool': 1, 'int8': 1, 'uint8': 1, 'int16': 2, 'uint16': 2,
             'float16': 2, 'int32': 4, 'uint32': 4, 'float32': 4,
             'int64': 8, 'uint64': 8, 'float64': 8, 'complex64': 8,
             'complex128': 16}


def dtype_name(dtype: Any) -> str:
  """'float32' for np.float32, np.dtype('float32') or 'float32' (planning
  code does not import numpy: it changes the process's warning filters)."""
  if isinstance(dtype, type):
    name = dtype.__name__
  else:
    name = getattr(dtype, 'name', None) or str(dtype)
  name = {'bool_': 'bool', 'float': 'float64', 'int': 'int64'}.get(name, name)
  if name not in _ITEMSIZE:
    raise ValueError(f'unknown dtype {dtype!r}')
  return name


@dataclasses.dataclass(frozen=True)
class Column:
  """One field of a step as a table stores it."""
  path: str
  shape: Tuple[int, ...]
  dtype: str

  @property
  def nbytes(self) -> int:
    size = _ITEMSIZE[dtype_name(self.dtype)]
    for dim in self.shape:
      size *= dim
    return size

  @property
  def pixel(self) -> bool:
    """Images: uint8 of rank 2 or more (frames compress, floats do not)."""
    return dtype_name(self.dtype) == 'uint8' and len(self.shape) >= 2


@dataclasses.dataclass(frozen=True)
class TableLayout:
  """What an adapter declares of one replay table."""
  name: str
  max_size: int                 # Items the table holds at most.
  columns: Tuple[Column, ...]   # What one step stores.
  steps_per_item: int           # Steps one item spans.
  new_steps_per_item: int       # Steps each item adds (its period).
  # The --config fields that change the size, the first the table's size.
  fields: Tuple[str, ...] = ()


def columns(prefix: str, spec: Any) -> Tuple[Column, ...]:
  """The leaves of a (nested) spec as columns: anything with a shape and a
  dtype (dm_env specs, numpy arrays), in dicts, tuples, lists and named
  tuples."""
  found: List[Column] = []

  def visit(path: str, node: Any) -> None:
    if hasattr(node, 'shape') and hasattr(node, 'dtype'):
      found.append(Column(path, tuple(int(d) for d in node.shape),
                          dtype_name(node.dtype)))
    elif isinstance(node, dict):
      for key in sorted(node):
        visit(f'{path}.{key}', node[key])
    elif isinstance(node, (tuple, list)):
      names = getattr(node, '_fields', None) or range(len(node))
      for name, child in zip(names, node):
        visit(f'{path}.{name}', child)
    elif node is not None:
      raise TypeError(f'{path}: {type(node).__name__} has no shape and dtype')

  visit(prefix, spec)
  return tuple(found)


def scalar(path: str, dtype: str) -> Column:
  return Column(path, (), dtype_name(dtype))


@dataclasses.dataclass(frozen=True)
class TableEstimate:
  layout: TableLayout
  stored_steps: int
  raw_bytes_per_step: int
  bytes_per_step: float     # Compressed, as Reverb holds it.
  bytes: float              # The whole table, items included.


@dataclasses.dataclass(frozen=True)
class ReplayEstimate:
  tables: Tuple[TableEstimate, ...]
  baseline_bytes: float
  checkpoint_bytes: float = 0.0  # Room for Reverb's checkpoints (0: off).

  @property
  def bytes(self) -> float:
    return (self.baseline_bytes + sum(t.bytes for t in self.tables) +
            self.checkpoint_bytes)

  @property
  def fields(self) -> Tuple[str, ...]:
    seen: List[str] = []
    for table in self.tables:
      seen += [f for f in table.layout.fields if f not in seen]
    return tuple(seen)


def step_bytes(layout: TableLayout) -> Tuple[int, float]:
  """(raw, as held) bytes of one stored step: compressed data and its
  share of its chunks' overhead."""
  pixel = sum(c.nbytes for c in layout.columns if c.pixel)
  other = sum(c.nbytes for c in layout.columns if not c.pixel)
  fixed = len(layout.columns) * COLUMN_STEP_OVERHEAD_BYTES
  return pixel + other, (pixel / PIXEL_COMPRESSION +
                         other / VECTOR_COMPRESSION + fixed)


def estimate_table(layout: TableLayout) -> TableEstimate:
  period = max(1, layout.new_steps_per_item)
  stored = (layout.max_size * period +
            max(0, layout.steps_per_item - period))
  raw, compressed = step_bytes(layout)
  return TableEstimate(
      layout, stored, raw, compressed,
      stored * compressed + layout.max_size * ITEM_OVERHEAD_BYTES)


def estimate(layouts: Iterable[TableLayout],
             checkpoints: bool = False) -> ReplayEstimate:
  """The replay node's memory when its tables are full; with `checkpoints`
  (`config.checkpoint.replay`), plus the room Reverb's checkpoints take."""
  tables = tuple(estimate_table(l) for l in layouts)
  room = CHECKPOINT_ROOM * sum(t.bytes for t in tables) if checkpoints else 0.0
  return ReplayEstimate(tables, PROCESS_BASELINE_MB * 2**20, room)


def host_memory_bytes(meminfo: str = '/proc/meminfo') -> Optional[int]:
  """This host's physical memory (MemTotal), None where unknown."""
  try:
    with open(meminfo) as f:
      for line in f:
        if line.startswith('MemTotal:'):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return None


def _gb(value: float) -> str:
  return f'{value / _GB:,.1f} GB' if value >= 0.1 * _GB else (
      f'{value / 1e6:,.0f} MB')


def describe_table(table: TableEstimate) -> str:
  layout = table.layout
  return (f'table {layout.name!r}: {layout.max_size:,} items x '
          f'{max(1, layout.new_steps_per_item)} new '
          f'step{"s" if layout.new_steps_per_item > 1 else ""} = '
          f'{table.stored_steps:,} steps of {table.raw_bytes_per_step:,} B '
          f'({table.bytes_per_step:,.0f} B as stored)')


LIMIT_FIELD = 'config.resources.replay.ray_memory_mb'
CHECKPOINT_FIELD = 'config.checkpoint.replay'


@dataclasses.dataclass(frozen=True)
class ReplayPlan:
  """The estimate and what it must fit in."""
  estimate: ReplayEstimate
  # The replay node's Ray memory reservation (MB; 0: none), under
  # --launch_type=ray, where it is the node's limit.
  limit_mb: int = 0
  # This host's memory, where the replay node runs on it (None: it runs
  # elsewhere, or the host's memory is unknown).
  host_bytes: Optional[int] = None


def format_plan(replay: ReplayPlan) -> str:
  """The dry run's lines: the estimate next to the limits, its tables."""
  estimate = replay.estimate
  limits = []
  if replay.limit_mb:
    limits.append(f'limit {_gb(replay.limit_mb * 2**20)} (--{LIMIT_FIELD})')
  if replay.host_bytes:
    limits.append(f"this host's memory {_gb(replay.host_bytes)}")
  lines = [f'replay/0 memory: about {_gb(estimate.bytes)} when full, of '
           f'{" and ".join(limits) or "no limit known"}']
  for table in estimate.tables:
    lines.append(f'  {describe_table(table)}: {_gb(table.bytes)}')
  if estimate.checkpoint_bytes:
    lines.append(f'  + room for its checkpoints, about '
                 f'{_gb(estimate.checkpoint_bytes)} ({CHECKPOINT_ROOM:.0%} of '
                 f'the tables; --{CHECKPOINT_FIELD}=false drops it)')
  lines.append(f'  + the process itself, about {_gb(estimate.baseline_bytes)}'
               f'; sized by {", ".join("--" + f for f in estimate.fields)}')
  return '\n'.join(lines)


def check(replay: ReplayPlan) -> None:
  """LaunchError (one line) if the estimate exceeds the replay node's limit
  or the host's memory."""
  estimate = replay.estimate
  need = estimate.bytes
  over_limit = bool(replay.limit_mb) and need > replay.limit_mb * 2**20
  over_host = bool(replay.host_bytes) and need > replay.host_bytes
  if not (over_limit or over_host):
    return
  over = []
  if over_limit:
    over.append(f'its memory limit {_gb(replay.limit_mb * 2**20)} '
                f'(--{LIMIT_FIELD}={replay.limit_mb})')
  if over_host:
    over.append(f"this host's memory {_gb(replay.host_bytes)}")
  parts = [describe_table(t) for t in estimate.tables]
  if estimate.checkpoint_bytes:
    parts.append(f'{_gb(estimate.checkpoint_bytes)} of room for its '
                 f'checkpoints, --{CHECKPOINT_FIELD}=false drops it')
  raise errors.LaunchError(
      f'the replay node would need about {_gb(need)} when full, more than '
      f'{" and ".join(over)} ({"; ".join(parts)}); lower '
      f'{", ".join("--" + f for f in estimate.fields)}'
      + (f', or raise --{LIMIT_FIELD}' if over_limit and not over_host
         else ''))


def sequence_steps(burn_in: int, trace: int) -> int:
  """Steps of one R2D2 sequence: Acme's `burn_in + trace + 1`."""
  return burn_in + trace + 1


def transition_layout(name: str, max_size: int, environment_spec: Any,
                      n_step: int, fields: Sequence[str],
                      extras: Any = None) -> TableLayout:
  """A table of Acme's NStepTransitionAdder: one item per step, each item
  referring to two observations n steps apart (stored once), with the
  n-step return and discount it appends to every step."""
  reward = environment_spec.rewards
  discount = environment_spec.discounts
  step = (columns('observation', environment_spec.observations) +
          columns('action', environment_spec.actions) +
          columns('reward', reward) + columns('discount', discount) +
          (scalar('start_of_episode', 'bool'),) +
          columns('n_step_return', reward) +
          columns('total_discount', discount) +
          (columns('extras', extras) if extras is not None else ()))
  return TableLayout(name, int(max_size), step, int(n_step) + 1, 1,
                     tuple(fields))


def sequence_layout(name: str, max_size: int, environment_spec: Any,
                    sequence_length: int, period: int, fields: Sequence[str],
                    extras: Any = None) -> TableLayout:
  """A table of Acme's SequenceAdder: items of `sequence_length` steps, a
  new one every `period` steps (overlapping steps stored once)."""
  step = (columns('observation', environment_spec.observations) +
          columns('action', environment_spec.actions) +
          columns('reward', environment_spec.rewards) +
          columns('discount', environment_spec.discounts) +
          (scalar('start_of_episode', 'bool'),) +
          (columns('extras', extras) if extras is not None else ()))
  return TableLayout(name, int(max_size), step, int(sequence_length),
                     int(period), tuple(fields))
