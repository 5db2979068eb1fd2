"""What the run key's proof costs a run: the same program on the same
three-host cluster with the key (the default) and with --run_key=off, side
by side.

    sudo .venv/bin/python bench/run_key.py [--configs=ppo_mujoco,dqn_atari]
        [--rounds=3] [--seconds=40] [--warmup=5] [--handshake_us=40]
        [--out=bench/out]

(tests/e2e/test_bench_cluster.py runs it tiny: --configs=ppo_mujoco
--rounds=1 --seconds=5 --steps=24000 ...)

The cluster is bench/cluster.py's (tests/netns_cluster.py's network
namespaces, Ray's own CLI, token authentication): learner, replay and
counter on host a, the actors alternately on hosts b and c, so every
actor's inserts, variable fetches and counts cross hosts, each connection
proving the key (the shim's handshake, acme_launch/run/native/) or not.
For each config, --rounds rounds, each one run with the key and one with
--run_key=off, in alternating order (key first in odd rounds: key off,
off key, ...), so that neither always goes second.

The window: from the counter's row at the learner's first step plus
--warmup to the program's last row. Start-up, and the wait for the
learner's first step (its compilation, which moves by seconds with the
machine's load), are left out of both arms. Two figures per program over
that window:
  - env steps/s, from the counter's totals;
  - CPU seconds per 1,000 env steps: utime + stime, from /proc every 0.5 s,
    of every process in the three hosts' network namespaces (the launcher,
    the Ray workers that host the nodes, the nodes and their children, and
    Ray's own daemons and idle workers: included, the same in both arms),
    each end of the window interpolated between the samples around it. It
    moves less than steps/s with the scheduling of ~20 processes on few
    cores: work that waits for a core costs time, not CPU.
Per config it prints each round's pair of each figure and its key/off - 1,
the median of each arm, the median over rounds of key/off - 1 (a round's
pair ran back to back, so load that comes and goes touches both): the
proof's cost to the run; and the spread of each arm over rounds ((max -
min) / median), the noise that cost is read against.

What the proof can cost at most: it is paid once per connection (the shim
wraps only bind, listen, accept and connect). The TCP connections accepted
in the three namespaces (PassiveOpens of each one's /proc/net/snmp,
loopback ones and Ray's own included, so no fewer than those that proved
the key) are counted over the whole program and over the window; the
whole program's, start-up's included, times --handshake_us
(bench/connect.py's key minus hosts, per connection), as a fraction of the
window's CPU seconds, is printed per round of the key's arm as `bound`,
and its maximum.

Needs root (network namespaces): otherwise one line, exit 2. The figures
are also written to OUT/run_key.json, each program's /proc samples (time,
CPU seconds, connections accepted) to its run folder's host_samples.json.

The programs: ppo_mujoco with bench/throughput.py's light PPO settings;
dqn_atari with its shipped network, envs and epsilons, a replay of 10,000
transitions filled from 2,000 and 0.1 samples per insert, so that the
actors (not the CPU-bound learner) set the pace. No evaluator in either.
"""

import argparse
import bisect
import csv
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import cluster as cluster_bench  # bench/cluster.py: placement, start-up.
import throughput  # bench/throughput.py: the PPO program and the rate.

from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.report import number

CONFIGS = ('ppo_mujoco', 'dqn_atari')
ARMS = ('key', 'off')
ARM_FLAGS = {'key': (), 'off': ('--run_key=off',)}
DQN_FLAGS = ('--config.dqn.min_replay_size=2000',
             '--config.dqn.max_replay_size=10000',
             '--config.dqn.samples_per_insert=0.1')
# The two figures per program, and how they are printed.
FIGURES = {'steps_per_second': ',.0f', 'cpu_per_1000_steps': '.3f'}
_CLOCK_TICKS = os.sysconf('SC_CLK_TCK')


class Window(NamedTuple):
  """The measured stretch of a run: counter rows at its two ends."""
  start: float  # wall_time, seconds since the epoch.
  end: float
  steps: float  # Actor env steps between them.

  @property
  def rate(self) -> float:
    return self.steps / (self.end - self.start)


def learning_window(progress_csv: str, warmup: float) -> Optional[Window]:
  """From the first counter row with a learner step plus `warmup` seconds
  to the last row; None without two such rows a second apart."""
  if not os.path.isfile(progress_csv):
    return None
  with open(progress_csv, newline='') as f:
    rows = [(float(r['wall_time']), float(r['actor_steps']),
             float(r['learner_steps'])) for r in csv.DictReader(f)]
  learning = [t for t, _, learner in rows if learner > 0]
  if not learning:
    return None
  window = [(t, a) for t, a, _ in rows if t >= learning[0] + warmup]
  if len(window) < 2 or window[-1][0] - window[0][0] < 1:
    return None
  return Window(window[0][0], window[-1][0], window[-1][1] - window[0][1])


def _cpu_ticks(pid: str) -> int:
  """utime + stime of a process, in clock ticks."""
  with open(f'/proc/{pid}/stat') as f:
    fields = f.read().rsplit(')', 1)[1].split()
  return int(fields[11]) + int(fields[12])


def _passive_opens(pid: str) -> int:
  """TCP connections accepted so far in `pid`'s network namespace."""
  with open(f'/proc/{pid}/net/snmp') as f:
    tcp = [line.split() for line in f if line.startswith('Tcp:')]
  return int(tcp[1][tcp[0].index('PassiveOpens')])


class HostSampler:
  """Every `interval` seconds, from /proc: the CPU time of every process in
  the cluster's hosts' network namespaces (the launcher, the Ray workers
  that host the nodes, the nodes, and Ray's own daemons and idle workers),
  and the TCP connections accepted in those namespaces so far."""

  def __init__(self, cluster: netns_cluster.NetnsCluster,
               interval: float = 0.5):
    self._namespaces = {
        os.stat(f'/run/netns/{cluster.namespace(h)}').st_ino
        for h in cluster.names}
    self._interval = interval
    self._ticks: Dict[str, int] = {}
    self._cpu = 0.0  # CPU seconds of the hosts' processes since `start`.
    self.samples: List[Tuple[float, float, int]] = []  # time, CPU, accepted.
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True)

  def sample(self) -> None:
    when = time.time()
    ticks, opens = {}, {}
    for pid in os.listdir('/proc'):
      if not pid.isdigit():
        continue
      try:
        namespace = os.stat(f'/proc/{pid}/ns/net').st_ino
        if namespace not in self._namespaces:
          continue
        ticks[pid] = _cpu_ticks(pid)
        if namespace not in opens:
          opens[namespace] = _passive_opens(pid)
      except (OSError, IndexError, ValueError):
        continue  # Gone between listing and reading.
    # A process seen for the first time brings all its CPU time: it began
    # after the last sample (or it is the first sample, which sets zero).
    if self.samples:
      self._cpu += sum(t - self._ticks.get(pid, 0)
                       for pid, t in ticks.items()) / _CLOCK_TICKS
    self._ticks = ticks
    self.samples.append((when, self._cpu, sum(opens.values())))

  def _loop(self) -> None:
    while not self._stop.wait(self._interval):
      self.sample()

  def __enter__(self) -> 'HostSampler':
    self.sample()
    self._thread.start()
    return self

  def __exit__(self, *_) -> None:
    self._stop.set()
    self._thread.join()
    self.sample()

  def cpu_seconds(self, start: float, end: float) -> Optional[float]:
    """CPU seconds of the hosts' processes from `start` to `end`, each end
    interpolated between the samples around it."""
    times = [s[0] for s in self.samples]
    cpu = [s[1] for s in self.samples]
    if not times or start < times[0] or end > times[-1]:
      return None

    def at(t: float) -> float:
      i = max(bisect.bisect_left(times, t), 1)
      (t0, c0), (t1, c1) = (times[i - 1], cpu[i - 1]), (times[i], cpu[i])
      return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1

    return at(end) - at(start)

  def accepted(self, start: float = -math.inf,
               end: float = math.inf) -> Optional[int]:
    """Connections accepted from the last sample at or before `start` to
    the first at or after `end` (a window no narrower than asked); by
    default over all the samples."""
    start = max(start, self.samples[0][0])
    end = min(end, self.samples[-1][0])
    before = [s[2] for s in self.samples if s[0] <= start]
    after = [s[2] for s in self.samples if s[0] >= end]
    return after[0] - before[-1]


def _run_dqn(workdir: str, actors: int, args: argparse.Namespace,
             flags: Sequence[str], run_name: str, prefix: Sequence[str],
             env: Dict[str, str]) -> None:
  """Runs dqn_atari (see the module docstring)."""
  command = [*prefix, *launch_command('--config=dqn_atari'),
             f'--workdir={workdir}', f'--run_name={run_name}',
             f'--config.num_actors={actors}', '--config.num_evaluators=0',
             f'--max_wall_time={args.seconds + args.startup_allowance}',
             f'--config.max_actor_steps={args.steps}', '--progress_every=1000',
             *DQN_FLAGS, *flags]
  result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                          text=True, check=False, env=env)
  if result.returncode != 0:
    print(f'{run_name}: launch exit {result.returncode}; its output ends:\n'
          f'{result.stdout[-1500:]}{result.stderr[-1500:]}', file=sys.stderr)


def measure(cluster: netns_cluster.NetnsCluster, config: str, arm: str,
            round_index: int, workdir: str,
            args: argparse.Namespace) -> Dict[str, Optional[float]]:
  """One program on the cluster, with or without the key: its figures
  (FIGURES, and the window's seconds, connections accepted and the bound
  they give), None where not measured."""
  flags = (*cluster_bench.ray_placement(cluster, args.actors),
           *ARM_FLAGS[arm])
  run_name = f'{config}_{arm}_{round_index}'
  prefix = tuple(cluster.in_host('a', []))
  with HostSampler(cluster) as sampler:
    if config == 'ppo_mujoco':
      throughput.run_acme_launch(
          workdir, args.actors, args.envs_per_actor, args.backend, args,
          flags, run_name=run_name, prefix=prefix, env=cluster.env)
    else:
      _run_dqn(workdir, args.actors, args, flags, run_name, prefix,
               cluster.env)
  run_dir = os.path.join(workdir, run_name)
  if os.path.isdir(run_dir):  # The samples, for other windows later.
    with open(os.path.join(run_dir, 'host_samples.json'), 'w') as f:
      json.dump(sampler.samples, f)
  window = learning_window(
      os.path.join(run_dir, 'metrics', 'progress.csv'), args.warmup)
  figures = dict.fromkeys(
      ('steps_per_second', 'cpu_per_1000_steps', 'window_seconds',
       'accepted', 'accepted_in_window', 'handshake_bound'))
  figures['accepted'] = sampler.accepted()
  if window is None:
    print(f'{run_name}: no rate while learning (no two counter rows a second '
          'apart after its first learner step and the warm-up)',
          file=sys.stderr)
    return figures
  figures['steps_per_second'] = window.rate
  figures['window_seconds'] = window.end - window.start
  cpu = sampler.cpu_seconds(window.start, window.end)
  if cpu and window.steps > 0:
    figures['cpu_per_1000_steps'] = cpu / window.steps * 1000
  figures['accepted_in_window'] = sampler.accepted(window.start, window.end)
  # Every handshake of the program, start-up's too, charged to the window.
  if cpu and figures['accepted'] is not None:
    figures['handshake_bound'] = (
        figures['accepted'] * args.handshake_us * 1e-6 / cpu)
  return figures


def cost(key: Sequence[Optional[float]],
         off: Sequence[Optional[float]]) -> Optional[float]:
  """The median over rounds of key/off - 1; None if a round has no figure."""
  if not key or None in key or None in off:
    return None
  return statistics.median(k / o - 1 for k, o in zip(key, off))


def spread(values: Sequence[Optional[float]]) -> Optional[float]:
  """(max - min) / median of one arm's rounds; None with a missing one."""
  if len(values) < 2 or None in values:
    return None
  return (max(values) - min(values)) / statistics.median(values)


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
  return statistics.median(values) if values and None not in values else None


def _print_config(config: str, runs: Dict[str, List[Dict]]) -> Dict:
  """Prints a config's table; returns its figures for the JSON."""
  result = {}
  print(f'\n{config}: per round key / off (key/off - 1); connections '
        'accepted over the program (in the window) key / off, and the bound '
        'they give')
  print(f'{"":>8} {"env steps/s":>26} {"CPU s per 1,000 steps":>26} '
        f'{"accepted":>16} {"bound":>8}')
  for i, (k, o) in enumerate(zip(runs['key'], runs['off'])):
    cells = []
    for name, spec in FIGURES.items():
      a, b = k[name], o[name]
      change = f'{a / b - 1:+.1%}' if a and b else '-'
      cells.append(f'{number(a, spec):>8} / {number(b, spec):<8} {change:>6}')
    accepted = ' / '.join(
        f'{number(r["accepted"], "d")} ({number(r["accepted_in_window"], "d")})'
        for r in (k, o))
    bound = k['handshake_bound']
    print(f'{f"round {i + 1}":>8} {cells[0]:>26} {cells[1]:>26} '
          f'{accepted:>16} {(f"{bound:.4%}" if bound is not None else "-"):>8}')
  cells = []
  for name, spec in FIGURES.items():
    values = {arm: [r[name] for r in runs[arm]] for arm in ARMS}
    change = cost(values['key'], values['off'])
    result[name] = {
        'key_rounds': values['key'], 'off_rounds': values['off'],
        'key_median': _median(values['key']),
        'off_median': _median(values['off']),
        'key_spread': spread(values['key']),
        'off_spread': spread(values['off']),
        'median_key_over_off_minus_1': change}
    cells.append(f'{number(_median(values["key"]), spec):>8} / '
                 f'{number(_median(values["off"]), spec):<8} '
                 f'{(f"{change:+.1%}" if change is not None else "-"):>6}')
  bounds = [r['handshake_bound'] for r in runs['key']]
  print(f'{"median":>8} {cells[0]:>26} {cells[1]:>26} {"":>16} '
        f'{(f"{max(bounds):.4%}" if None not in bounds else "-"):>8} (max)')
  for name in FIGURES:
    spreads = [result[name][f'{arm}_spread'] for arm in ARMS]
    if None not in spreads:
      print(f'{"spread":>8} {name}: (max - min) / median, key {spreads[0]:.1%}'
            f', off {spreads[1]:.1%}')
  for name in ('accepted', 'accepted_in_window'):
    result[name] = {arm: [r[name] for r in runs[arm]] for arm in ARMS}
  result['window_seconds'] = {arm: [r['window_seconds'] for r in runs[arm]]
                              for arm in ARMS}
  result['handshake_bound_max'] = max(bounds) if None not in bounds else None
  return result


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog='\n'.join(__doc__.splitlines()[1:]))
  parser.add_argument('--configs', default=','.join(CONFIGS),
                      help=f'comma-separated, of {", ".join(CONFIGS)}')
  parser.add_argument('--actors', type=int, default=2)
  parser.add_argument('--envs_per_actor', type=int, default=16,
                      help='ppo_mujoco only (dqn_atari keeps its 8)')
  parser.add_argument('--backend', default='gym', help='ppo_mujoco only')
  parser.add_argument('--rounds', type=int, default=3,
                      help='pairs per config, key first in odd rounds')
  parser.add_argument('--handshake_us', type=float, default=40.0,
                      help='what the proof costs one connection, in '
                      'microseconds (bench/connect.py: key minus hosts; 25 '
                      'to 40 on a 2-core VM), for the bound')
  throughput.add_program_arguments(parser)
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = parser.parse_args(argv)
  configs = [c.strip() for c in args.configs.split(',') if c.strip()]
  unknown = [c for c in configs if c not in CONFIGS]
  if unknown or not configs or args.rounds < 1:
    why = (f'--configs: {", ".join(unknown)} not one of {", ".join(CONFIGS)}'
           if unknown or not configs else
           f'--rounds must be at least 1, not {args.rounds}')
    print(f'bench/run_key.py: error: {why}', file=sys.stderr)
    return 2
  why_not = netns_cluster.why_not_available()
  if why_not:
    print(f'bench/run_key.py: error: no network namespaces here ({why_not}); '
          'the cluster needs them', file=sys.stderr)
    return 2
  workdir = os.path.join(args.out, 'run_key')
  shutil.rmtree(workdir, ignore_errors=True)
  os.makedirs(workdir)
  args.startup_allowance += cluster_bench.RAY_STARTUP_EXTRA
  print(f'machine: {os.cpu_count()} cores; {args.actors} actor(s) on hosts b '
        f'and c, {args.seconds:.0f} s per program, {args.rounds} round(s)',
        flush=True)
  cluster = netns_cluster.NetnsCluster(['a', 'b', 'c'],
                                       {'a': 4, 'b': 4, 'c': 4})
  # A SIGTERM ends the bench through `finally`: the cluster taken down.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
  runs = {c: {arm: [] for arm in ARMS} for c in configs}
  try:
    cluster.up()
    for round_index in range(args.rounds):
      order = ARMS if round_index % 2 == 0 else ARMS[::-1]
      for config in configs:
        for arm in order:
          load = os.getloadavg()[0]
          figures = measure(cluster, config, arm, round_index, workdir, args)
          runs[config][arm].append(figures)
          print(f'round {round_index + 1} {config} {arm}: '
                f'{number(figures["steps_per_second"])} env steps/s, '
                f'{number(figures["cpu_per_1000_steps"], ".3f")} CPU s per '
                f'1,000 steps over {number(figures["window_seconds"], ".0f")}'
                f' s (load average {load:.1f} at its start)', flush=True)
  finally:
    cluster.down()
  results = {'cores': os.cpu_count(), 'seconds': args.seconds,
             'warmup': args.warmup, 'rounds': args.rounds,
             'actors': args.actors, 'handshake_us': args.handshake_us,
             'configs': {}}
  for config in configs:
    results['configs'][config] = _print_config(config, runs[config])
  with open(os.path.join(args.out, 'run_key.json'), 'w') as f:
    json.dump(results, f, indent=1)
  return 0 if all(r[name]['median_key_over_off_minus_1'] is not None
                  for r in results['configs'].values()
                  for name in FIGURES) else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
