"""Reverb's memory for replay data, measured: the figures that
acme_launch/plan/replay_memory.py plans the replay node with.

    nice -n 19 .venv/bin/python bench/replay_memory.py [--steps=20000] \
        [--checkpoint_items=100000] [--checkpoint_rounds=8] [--settle=1] \
        [--out=bench/out]

A real Reverb server runs in a process of its own (importing the stack as a
replay node does); this process writes real environment steps into it
through Acme's own adders, exactly as actors do, and reads the server's
resident memory (RSS, /proc) before and after, each read once it moved
less than 1 MiB in --settle seconds (half that for an empty server). Four
fills, each on a fresh
server, each after a warm-up of a tenth of its steps:

  transitions  gym HalfCheetah-v4, random actions, NStepTransitionAdder
               (n_step 1): one item per step (SAC, TD3)
  sequences    the same steps, SequenceAdder 100 steps apart: few items
  pixels       EnvPool Pong-v5 as the atari family gives it (4x84x84
               uint8), random actions, SequenceAdder as R2D2's builder makes
               it (8 + 40 + 1 steps, period 20, delta encoded)
  r2d2         the same with R2D2's extras: the LSTM state (512 + 512
               float32) of r2d2_atari's network, random weights, stepped on
               each frame as its actor does

Each fill's growth is items * (bytes per item) + steps * columns * (bytes
per column-step) + data / compression: the first two fills give the
overheads, the pixel fill the pixel compression, the difference of the last
two the vector (float) compression.

Then checkpoints, each on a fresh server with Reverb's checkpointer and one
FIFO table: --checkpoint_items Pong frame stacks as DQN's 3-step
transitions (dqn_atari's table), as many HalfCheetah-v4 steps as SAC's
1-step transitions (vector, item-heavy), and Pong as R2D2's sequences (a
twentieth as many items, 20 new steps each). Full, then --checkpoint_rounds
times a fifth of the table replaced by new items and a checkpoint written,
as the replay node does every checkpoint.interval_minutes, and the freed
memory handed back, as the node does (node/memory.py); the Pong
transitions once more without that. The RSS after each checkpoint and the
highest while writing one, above the full table's, over the table's own
memory (full - empty): the room checkpoints take (CHECKPOINT_ROOM in the
plan is the largest).

Prints them and writes OUT/replay_memory.json. `measure_growth` is also
what tests/plan/test_replay_memory.py checks the estimate against.
"""

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional

from acme_launch.testing.launcher import REPO_ROOT

TABLE = 'table'


def _serve(conn, max_size: int, checkpoint_dir: Optional[str]) -> None:
  """The server process: the replay node's imports, one table (and Reverb's
  checkpointer in `checkpoint_dir`, as the replay node makes it), until
  told."""
  from acme_launch import compat
  import acme  # noqa: F401  (the replay node's imports, for its memory)
  import reverb
  table = reverb.Table(
      name=TABLE, sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(), max_size=max_size,
      rate_limiter=reverb.rate_limiters.MinSize(1))
  checkpointer = (reverb.checkpointers.DefaultCheckpointer(checkpoint_dir)
                  if checkpoint_dir else None)
  server = reverb.Server([table], checkpointer=checkpointer)
  conn.send(server.port)
  from acme_launch.node import memory
  while conn.recv() == 'release':  # As the replay node after a checkpoint.
    conn.send(memory.release_free_memory())
  server.stop()


def rss_bytes(pid: int) -> int:
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f'no VmRSS for process {pid}')


@contextlib.contextmanager
def server_process(max_size: int, checkpoint_dir: Optional[str] = None):
  """(port, pid, connection) of a Reverb server with one table, in a
  process of its own; send 'release' on the connection to have it hand its
  freed memory back (it answers with the bytes)."""
  context = multiprocessing.get_context('spawn')
  parent, child = context.Pipe()
  process = context.Process(target=_serve,
                            args=(child, max_size, checkpoint_dir), daemon=True)
  process.start()
  try:
    if not parent.poll(300):
      raise RuntimeError('the Reverb server process did not start')
    yield parent.recv(), process.pid, parent
  finally:
    with contextlib.suppress(OSError, BrokenPipeError):
      parent.send('stop')
    process.join(30)
    if process.is_alive():
      process.kill()


def table_size(client) -> int:
  return client.server_info()[TABLE].current_size


def _settled_rss(pid: int, seconds: float = 1.0) -> int:
  """RSS once it stops moving (the server has taken in what was sent)."""
  last = rss_bytes(pid)
  while True:
    time.sleep(seconds)
    now = rss_bytes(pid)
    if abs(now - last) < 2**20:
      return now
    last = now


def add_step(adder, action, timestep, extras) -> None:
  """One of env_steps' (action, timestep, extras) through an Acme adder."""
  if timestep.first():
    adder.add_first(timestep)
  elif extras is None:
    adder.add(action, timestep)
  else:
    adder.add(action, timestep, extras)


def measure_growth(make_adder: Callable, steps: Iterator, warmup_steps: int,
                   max_size: int = 10_000_000,
                   settle: float = 1.0) -> Dict[str, float]:
  """A server's RSS growth while `make_adder(client)` writes `steps`
  ((action, timestep, extras) triples; timestep.first() starts an
  episode) into it, after `warmup_steps` of them (gRPC's and the table's
  one-time allocations). Returns steps, items and bytes of the measured
  part, and the server's RSS before any data. Each RSS is read once it
  moved less than 1 MiB in `settle` seconds (`settle` / 2 empty)."""
  import reverb
  with server_process(max_size) as (port, pid, _):
    client = reverb.Client(f'localhost:{port}')
    empty = _settled_rss(pid, settle / 2)
    adder = make_adder(client)
    count, before, items0 = 0, None, 0
    for step in steps:
      add_step(adder, *step)
      count += 1
      if count == warmup_steps:
        adder._writer.flush()
        before, items0 = _settled_rss(pid, settle), table_size(client)
    adder._writer.flush()
    after = _settled_rss(pid, settle)
    items = table_size(client) - items0
    del adder
    return {'steps': count - warmup_steps, 'items': items,
            'growth_bytes': after - before, 'empty_rss_bytes': empty}


def measure_checkpoints(make_adder: Callable, steps: Iterator,
                        table_items: int, rounds: int,
                        new_fraction: float = 0.2, release: bool = True,
                        settle: float = 1.0) -> Dict[str, object]:
  """A server's RSS as the replay node checkpoints a full table: a FIFO
  table of `table_items` items filled from `steps`, then `rounds` times
  `new_fraction` of it replaced by new items and a Reverb checkpoint
  written (the two newest kept, as the node keeps them), then, with
  `release` (as the node does), the freed memory handed back
  (node/memory.py). Returns the RSS empty, full, after each checkpoint and
  at the highest while writing it; `room_fraction` and `peak_room_fraction`:
  the highest of those above the full table's RSS, over the table's own
  growth (full - empty). RSS settles as in `measure_growth`."""
  import reverb
  folder = tempfile.mkdtemp(prefix='replay_checkpoints_')
  try:
    with server_process(table_items, folder) as (port, pid, conn):
      client = reverb.Client(f'localhost:{port}')
      empty = _settled_rss(pid, settle / 2)
      adder = make_adder(client)

      def add_items(count: int, adder=adder) -> None:
        start = table_inserts(client)
        while table_inserts(client) - start < count:
          for _ in range(1000):
            add_step(adder, *next(steps))
          adder._writer.flush()

      add_items(table_items)
      full = _settled_rss(pid, settle)
      after: List[int] = []
      peaks: List[int] = []
      written: List[str] = []
      for _ in range(rounds):
        add_items(max(1, int(table_items * new_fraction)))
        with rss_peak(pid) as peak:
          written.append(client.checkpoint())
          if release:
            conn.send('release')
            conn.recv()
        peaks.append(peak[0])
        for old in written[:-2]:
          shutil.rmtree(old, ignore_errors=True)
        written = written[-2:]
        after.append(_settled_rss(pid, settle))
      del adder
  finally:
    shutil.rmtree(folder, ignore_errors=True)
  growth = full - empty
  room = lambda rss: (max(rss, default=full) - full) / growth if growth > 0 else (
      float('nan'))
  return {'table_items': table_items, 'rounds': rounds,
          'new_fraction': new_fraction, 'empty_rss_bytes': empty,
          'full_rss_bytes': full, 'rss_after_checkpoint_bytes': after,
          'rss_peak_during_checkpoint_bytes': peaks,
          'room_fraction': room(after), 'peak_room_fraction': room(peaks)}


@contextlib.contextmanager
def rss_peak(pid: int, every: float = 0.02):
  """Yields a one-element list that holds, once the block ends, the highest
  RSS of `pid` seen every `every` seconds while it ran."""
  peak, done = [rss_bytes(pid)], threading.Event()

  def watch():
    while not done.wait(every):
      peak[0] = max(peak[0], rss_bytes(pid))

  watcher = threading.Thread(target=watch, daemon=True)
  watcher.start()
  try:
    yield peak
  finally:
    done.set()
    watcher.join()
    peak[0] = max(peak[0], rss_bytes(pid))


def table_inserts(client) -> int:
  """Items ever inserted into the table (its size stops at max_size)."""
  info = client.server_info()[TABLE].rate_limiter_info
  return info.insert_stats.completed


def env_steps(environment, num_steps: int, seed: int = 0,
              extras_fn=None) -> Iterator:
  """(action, timestep, extras) of random play, episodes restarted;
  `extras_fn(timestep)`, if given, gives each step's extras from the
  observation its action was chosen on (R2D2's LSTM state before it)."""
  import numpy as np
  rng = np.random.default_rng(seed)
  spec = environment.action_spec()
  timestep = environment.reset()
  yield None, timestep, None
  for _ in range(num_steps - 1):
    extras = extras_fn(timestep) if extras_fn else None
    if hasattr(spec, 'num_values'):
      action = np.asarray(rng.integers(spec.num_values), spec.dtype)
    else:
      action = rng.uniform(spec.minimum, spec.maximum).astype(spec.dtype)
    timestep = environment.step(action)
    yield action, timestep, extras
    if timestep.last():
      timestep = environment.reset()
      yield None, timestep, None


def r2d2_states(config, environment_spec):
  """extras_fn giving R2D2's core state as its actor records it: the
  config's own network (random weights), stepped on each observation, its
  state reset at each episode's start."""
  import jax
  import numpy as np
  from acme_launch.agents.r2d2 import networks as r2d2_networks
  networks = r2d2_networks.make_networks(config, environment_spec)
  key = jax.random.PRNGKey(0)
  initial = networks.initial_state.apply(
      networks.initial_state.init(key, 1), key, 1)
  observation = np.zeros((1,) + environment_spec.observations.shape,
                         environment_spec.observations.dtype)
  params = networks.forward.init(key, observation, initial)
  forward = jax.jit(networks.forward.apply)
  state = [initial]

  def extras(timestep):
    if timestep.first():
      state[0] = initial
    recorded = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), state[0])
    _, state[0] = forward(params, key, timestep.observation[None], state[0])
    return {'core_state': recorded}

  return extras


def transitions_adder(n_step: int = 1):
  from acme.adders import reverb as adders
  return lambda client: adders.NStepTransitionAdder(
      client, n_step=n_step, discount=0.99, priority_fns={TABLE: None})


def sequence_adder(sequence_length: int, period: int):
  """Acme's SequenceAdder as R2D2's builder makes it (delta encoded)."""
  from acme.adders import reverb as adders
  return lambda client: adders.SequenceAdder(
      client, sequence_length=sequence_length, period=period,
      delta_encoded=True, priority_fns={TABLE: None})


def make_env(name: str, backend: str):
  from acme_launch import compat
  from acme_launch.envs import factory
  return factory.make_environment(name, seed=0, backend=backend)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--steps', type=int, default=20_000,
                      help='steps written into each table (after a warm-up '
                      'of a tenth of them)')
  parser.add_argument('--checkpoint_items', type=int, default=100_000,
                      help='items of each checkpointed transition table '
                      '(sequences: a twentieth)')
  parser.add_argument('--checkpoint_rounds', type=int, default=8,
                      help='checkpoints of it, a fifth of it new before each '
                      '(0: none)')
  parser.add_argument('--settle', type=float, default=1.0,
                      help='seconds in which the server\'s RSS must move '
                      'less than 1 MiB before it is read (an empty '
                      'server\'s: half)')
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args()
  if not args.settle > 0:
    parser.error('--settle must be a positive number of seconds')
  import numpy as np
  from acme_launch.plan import replay_memory
  warmup = max(100, args.steps // 10)
  total = args.steps + warmup

  # Vector fills: HalfCheetah steps as transitions (an item a step) and as
  # sequences 100 steps apart (few items). Each gives growth = items * I +
  # column-steps * C + vector bytes / ratio; the ratio is the R2D2 fills'.
  cheetah = make_env('HalfCheetah-v4', 'gym')
  spec = _spec(cheetah)
  fills = {
      'transitions': (transitions_adder(1), replay_memory.transition_layout(
          TABLE, 1, spec, 1, ())),
      'sequences': (sequence_adder(101, 100), replay_memory.sequence_layout(
          TABLE, 1, spec, 101, 100, ())),
  }
  results, rows = {}, []
  for name, (adder, layout) in fills.items():
    measured = measure_growth(adder, env_steps(cheetah, total), warmup,
                              settle=args.settle)
    results[name] = measured
    rows.append((measured, len(layout.columns),
                 replay_memory.step_bytes(layout)[0]))

  # Pixels: R2D2's sequences of Pong frames (8 + 40 + 1 steps, period 20),
  # without and with the LSTM state of r2d2_atari's network.
  from acme_launch.config import registry
  config = registry.load('r2d2_atari')
  pong = make_env('atari:Pong', 'envpool')
  pong_spec = _spec(pong)
  length, period = 8 + 40 + 1, 20
  results['pixels'] = measure_growth(sequence_adder(length, period),
                                     env_steps(pong, total), warmup,
                                     settle=args.settle)
  results['r2d2'] = measure_growth(
      sequence_adder(length, period),
      env_steps(pong, total, extras_fn=r2d2_states(config, pong_spec)),
      warmup, settle=args.settle)
  layout = replay_memory.sequence_layout(TABLE, 1, pong_spec, length, period,
                                         ())
  pixel_raw = sum(c.nbytes for c in layout.columns if c.pixel)
  other_raw = sum(c.nbytes for c in layout.columns if not c.pixel)
  state_raw = 2 * 4 * config.network.lstm_size  # hidden and cell, float32

  def per_step(fill):
    return fill['growth_bytes'] / fill['steps'], fill['items'] / fill['steps']

  inverse_ratio = 1.0
  for _ in range(5):  # The vector ratio and the overheads depend on each other.
    (g1, i1), (g2, i2) = [per_step(m) for m, _, _ in rows]
    matrix = np.array([[i1, rows[0][1]], [i2, rows[1][1]]], float)
    wanted = np.array([g1 - rows[0][2] * inverse_ratio,
                       g2 - rows[1][2] * inverse_ratio])
    item, column = np.linalg.solve(matrix, wanted)
    g_pixels, i_pixels = per_step(results['pixels'])
    g_r2d2, i_r2d2 = per_step(results['r2d2'])
    pixel_bytes = (g_pixels - i_pixels * item - len(layout.columns) * column
                   - other_raw * inverse_ratio)
    state_bytes = (g_r2d2 - i_r2d2 * item - (len(layout.columns) + 2) * column
                   - other_raw * inverse_ratio - pixel_bytes)
    inverse_ratio = state_bytes / state_raw
  # Tiny fills (--steps of a few hundred) are noise: no ratio then.
  vector_ratio = 1 / inverse_ratio if inverse_ratio > 0 else float('nan')
  pixel_ratio = pixel_raw / pixel_bytes if pixel_bytes > 0 else float('nan')

  # Checkpoints of three table shapes as the replay node makes them (freed
  # memory handed back after each), and of the first without that.
  if args.checkpoint_rounds:
    items = args.checkpoint_items
    fills = {
        'pong_transitions': (transitions_adder(3), pong, items, True),
        'cheetah_transitions': (transitions_adder(1), cheetah, items, True),
        'pong_sequences': (sequence_adder(length, period), pong,
                           max(1, items // 20), True),
        'pong_transitions_kept': (transitions_adder(3), pong, items, False),
    }
    results['checkpoints'] = {
        name: measure_checkpoints(adder, env_steps(env, 2**62, seed=2),
                                  size, args.checkpoint_rounds,
                                  release=release, settle=args.settle)
        for name, (adder, env, size, release) in fills.items()}

  results.update({
      'date': time.strftime('%Y-%m-%d'), 'steps_per_fill': args.steps,
      'pixel_raw_bytes_per_step': pixel_raw,
      'lstm_state_raw_bytes_per_step': state_raw,
      'item_overhead_bytes': round(item),
      'column_step_overhead_bytes': round(column),
      'vector_compression': round(vector_ratio, 2),
      'pixel_compression': round(pixel_ratio, 2),
      'empty_server_rss_mib': round(results['pixels']['empty_rss_bytes'] /
                                    2**20),
  })
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'replay_memory.json'), 'w') as f:
    json.dump(results, f, indent=1)
  mib = lambda b: f'{b / 2**20:,.1f} MiB'
  print(f'{"fill":<18} {"steps":>8} {"items":>8} {"RSS growth":>12}')
  for name in ('transitions', 'sequences', 'pixels', 'r2d2'):
    r = results[name]
    print(f'{name:<18} {r["steps"]:>8,} {r["items"]:>8,} '
          f'{mib(r["growth_bytes"]):>12}')
  print(f'\nbytes per item:      {item:,.0f}')
  print(f'bytes per column-step: {column:,.0f}')
  print(f'vector compression:  {vector_ratio:.2f}x '
        f'(R2D2 LSTM state, {state_raw:,} B a step)')
  print(f'pixel compression:   {pixel_ratio:.2f}x '
        f'({pixel_raw:,} B a Pong frame stack)')
  print(f'empty server RSS:    {results["empty_server_rss_mib"]} MiB')
  if 'checkpoints' in results:
    print(f'\ncheckpoints ({args.checkpoint_rounds}, a fifth of the table new '
          'before each; MiB):')
    print(f'{"table":<22} {"items":>8} {"full - empty":>13} '
          f'{"after each":>24} {"highest":>8} {"room after":>11} '
          f'{"highest":>8}')
    for name, c in results['checkpoints'].items():
      after = c['rss_after_checkpoint_bytes']
      print(f'{name:<22} {c["table_items"]:>8,} '
            f'{(c["full_rss_bytes"] - c["empty_rss_bytes"]) / 2**20:>13,.0f} '
            f'{f"{after[0] / 2**20:,.0f} to {after[-1] / 2**20:,.0f}":>24} '
            f'{max(c["rss_peak_during_checkpoint_bytes"]) / 2**20:>8,.0f} '
            f'{c["room_fraction"]:>11.0%} {c["peak_room_fraction"]:>8.0%}')
    print('(_kept: freed memory not handed back after each checkpoint; the '
          'replay node hands it back)')

def _spec(environment):
  from acme import specs
  return specs.make_environment_spec(environment)


if __name__ == '__main__':
  main()
