"""Chaos benchmark: a program on a namespace Ray cluster under seeded faults.

    sudo .venv/bin/python bench/chaos.py [--minutes=30] [--seed=0] \
        [--hosts=b,c] [--host_losses=22] [--process_kills=55] [--link_cuts=10] \
        [--steps=N] [--out=bench/out] [-- launch.py flags]

Makes a three-host Ray cluster of network namespaces (tests/netns_cluster.py:
head `a` holds replay, counter, learner and evaluator; workers `b`
and `c` share a resource `worker` the actors ask for), runs `--config` there
with `--launch_type=ray` from host a, and once the actors step, for
`--minutes` of wall time injects faults at seeded times on the hosts
`--hosts` (workers only; one fault at a time, so one worker stays up):
  - process kill: SIGKILL of a random actor's node process on those hosts;
  - host loss: SIGKILL of every process of a host (raylet, Ray workers,
    nodes), `--down_seconds` later Ray's own CLI (`ray start`) brings it
    back as a new Ray node on the same address;
  - link cut: the host's veth link down in the root namespace for
    `--cut_seconds` (briefer than the launcher's and Ray's timeouts, see
    docs/ray-faults.md), then up again.
Then lets the run go on to its budget (no more faults) and reports: the
faults injected, the restarts and moves the launcher made (its stdout and
summary.json), whether the run reached its budget, the counter's totals
against the actors' own step counts, and every node process, NodeHost actor
or Ray process left afterwards (must be none). Writes OUT/chaos.json.

Counting. Acme's actor loop reports an episode's steps to the counter when
the episode ends, then writes its metrics row (here every episode:
`log_every_seconds` tiny), so:
  - a killed actor's unfinished episode is in neither (at most
    episode_length - 1 steps per death): lost by design, not counted;
  - an actor killed between the counter's increment and its row leaves the
    counter ahead of the rows by that one episode: 0 <= counter - rows <=
    episode_length x actor deaths; anything else is a count lost or counted
    twice.
With the smoke config every episode is 100 steps (time limit, no terminal
state), so the counter's steps must also be 100 x its episodes.

The budget (`--steps`) defaults to `--minutes` x 60 x `--steps_per_second`.
While the chaos lasts, the bench holds the run to 90% of the budget spread
over the chaos time, by stopping the learner's process (SIGSTOP, on the head,
which no fault touches) whenever the counter is ahead (Pacer): so the run
outlasts the chaos however fast this machine is at the time, and plays its
last 10% without faults; it reports how long the learner was held. A run
slower than that pace is not held; if it reaches its budget before the chaos
ends anyway, the chaos stops there (and says so).
Needs root (network namespaces).
"""

import argparse
import csv
import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from acme_launch import layout
from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import REPO_ROOT, launch_command
from acme_launch.testing.rundir import actor_steps, node_records

HEAD = 'a'
WORKERS = ('b', 'c')
STATEFUL = ('replay', 'counter', 'learner', 'evaluator')
KINDS = ('process_kill', 'host_loss', 'link_cut')


class BadInput(Exception):
  pass


def parse(argv: List[str]) -> argparse.Namespace:
  if '--' in argv:
    at = argv.index('--')
    argv, extra = argv[:at], argv[at + 1:]
  else:
    extra = []
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--minutes', type=float, default=30.0)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--hosts', default=','.join(WORKERS),
                 help='worker hosts the faults hit (of ' +
                 ','.join(WORKERS) + ')')
  p.add_argument('--host_losses', type=int, default=22)
  p.add_argument('--process_kills', type=int, default=55)
  p.add_argument('--link_cuts', type=int, default=10)
  p.add_argument('--cut_seconds', type=float, default=5.0)
  p.add_argument('--down_seconds', type=float, default=5.0)
  p.add_argument('--config', default='smoke')
  p.add_argument('--actors', type=int, default=2)
  p.add_argument('--steps', type=int, default=0,
                 help='the step budget (default: from --minutes)')
  p.add_argument('--steps_per_second', type=float, default=300.0)
  p.add_argument('--episode_steps', type=int, default=100)
  p.add_argument('--finish_minutes', type=float, default=20.0,
                 help='after the chaos, how long the run may take to end')
  p.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  args = p.parse_args(argv)
  args.extra = extra
  hosts = [h for h in args.hosts.split(',') if h]
  unknown = [h for h in hosts if h not in WORKERS]
  if not hosts or unknown:
    raise BadInput(f'--hosts={args.hosts}: the cluster has worker hosts '
                   f'{",".join(WORKERS)} only (head {HEAD} runs the launcher '
                   'and is never faulted)' + (
                       f'; no such worker: {",".join(unknown)}'
                       if unknown else ''))
  args.hosts = hosts
  if not args.minutes > 0 or args.minutes == float('inf'):
    raise BadInput(f'--minutes must be a positive number, got {args.minutes}')
  for name in ('host_losses', 'process_kills', 'link_cuts', 'actors'):
    if getattr(args, name) < 0:
      raise BadInput(f'--{name} must be >= 0, got {getattr(args, name)}')
  for name in ('cut_seconds', 'down_seconds', 'steps_per_second',
               'finish_minutes'):
    if not getattr(args, name) > 0:
      raise BadInput(f'--{name} must be positive, got {getattr(args, name)}')
  if args.actors < 1 or args.steps < 0:
    raise BadInput('--actors must be >= 1 and --steps >= 0')
  if not args.steps:
    args.steps = int(args.minutes * 60 * args.steps_per_second)
  return args


def schedule(args) -> List[Dict]:
  """Seeded fault times (seconds after the chaos starts) and targets."""
  rng = random.Random(args.seed)
  span = args.minutes * 60
  events = []
  for kind, count in (('host_loss', args.host_losses),
                      ('process_kill', args.process_kills),
                      ('link_cut', args.link_cuts)):
    for _ in range(count):
      events.append({'at': round(rng.uniform(0, span * 0.95), 2),
                     'kind': kind, 'host': rng.choice(args.hosts)})
  events.sort(key=lambda e: e['at'])
  return events


class Lines:
  """The launcher's stdout: kept, and teed to a log file."""

  def __init__(self, stream, path: str):
    self.lines: List[str] = []
    self._log = open(path, 'w')
    self._thread = threading.Thread(target=self._read, args=(stream,),
                                    daemon=True)
    self._thread.start()

  def _read(self, stream) -> None:
    for line in iter(stream.readline, ''):
      self.lines.append(line)
      self._log.write(f'{time.time():.1f} {line}')
      self._log.flush()

  def join(self) -> None:
    self._thread.join(timeout=30)


def run_processes(cluster) -> List[str]:
  """Node processes and NodeHost actors in the cluster's namespaces."""
  return [f'{host} {pid} {command}'
          for host, pid, command in cluster.run_processes()]


def leftovers(cluster, run_dir: str) -> List[str]:
  """Any process on this machine of the cluster (its Ray temp dir in its
  command line) or of the run (a node of it); after cluster.down()."""
  found = []
  for entry in os.listdir('/proc'):
    if not entry.isdigit() or int(entry) == os.getpid():
      continue
    try:
      with open(f'/proc/{entry}/cmdline', 'rb') as f:
        command = f.read().replace(b'\0', b' ').decode(errors='replace')
      environ = b''
      if 'acme_launch' in command or 'ray' in command:
        with open(f'/proc/{entry}/environ', 'rb') as f:
          environ = f.read()
    except OSError:
      continue
    if cluster.temp in command or run_dir.encode() in environ:
      found.append(f'{entry} {command[:100]}')
  return found


class Injector:
  """Carries out the schedule, one fault at a time, and records each."""

  def __init__(self, cluster, run_dir: str, args, rng: random.Random):
    self.cluster = cluster
    self.run_dir = run_dir
    self.args = args
    self.rng = rng
    self.done: List[Dict] = []

  def actor_hosts(self) -> List[str]:
    ips = {self.cluster.ips[h]: h for h in self.args.hosts}
    return sorted({ips[r['bind_address']] for n, r in
                   node_records(self.run_dir).items()
                   if n.startswith('actor/') and r.get('bind_address') in ips})

  def target(self, event: Dict) -> str:
    """The planned host, or, when it runs no actor now and another fault
    host does, that one: a fault that hits no node proves little."""
    if event['kind'] == 'process_kill':
      return event['host']
    holding = self.actor_hosts()
    if event['host'] in holding or not holding:
      return event['host']
    return holding[0]

  def process_kill(self, host: str) -> Optional[Dict]:
    ips = {self.cluster.ips[h]: h for h in self.args.hosts}
    deadline = time.time() + 60   # Actors being moved start in tens of s.
    while time.time() < deadline:
      candidates = []
      for node, record in sorted(node_records(self.run_dir).items()):
        where = ips.get(record.get('bind_address'))
        if (node.startswith('actor/') and where and
            record['pid'] in self.cluster.pids(where)):
          candidates.append((node, where, record['pid']))
      if candidates:
        node, where, pid = self.rng.choice(candidates)
        try:
          os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
          continue
        return {'node': node, 'host': where, 'pid': pid}
      time.sleep(1)
    return None   # No actor process on those hosts for 60 s.

  def host_loss(self, host: str) -> Dict:
    pids = self.cluster.pids(host)
    self.cluster.kill_hosts([host], signals=(signal.SIGKILL,))
    time.sleep(self.args.down_seconds)
    for attempt in range(3):
      try:
        self.cluster.start_ray(host)
        return {'host': host, 'processes_killed': len(pids),
                'back_after_s': None, 'start_attempts': attempt + 1}
      except (RuntimeError, subprocess.TimeoutExpired) as e:
        error = str(e)[-300:]
        self.cluster.kill_hosts([host], signals=(signal.SIGKILL,))
        time.sleep(2)
    return {'host': host, 'processes_killed': len(pids),
            'not_back': error}

  def link_cut(self, host: str) -> Dict:
    veth = f'{self.cluster.tag}{host}'
    subprocess.run(['ip', 'link', 'set', veth, 'down'], check=True)
    try:
      time.sleep(self.args.cut_seconds)
    finally:
      subprocess.run(['ip', 'link', 'set', veth, 'up'], check=True)
    return {'host': host, 'seconds': self.args.cut_seconds}

  def run(self, events: List[Dict], start: float, stop: threading.Event,
          launcher) -> None:
    for event in events:
      while not stop.is_set() and time.time() < start + event['at']:
        stop.wait(min(1.0, start + event['at'] - time.time()))
      if stop.is_set() or launcher.poll() is not None:
        return
      began = time.time()
      host = self.target(event)
      detail = getattr(self, event['kind'])(host)
      record = {'kind': event['kind'], 'planned_at': event['at'],
                'at': round(began - start, 1),
                'took_s': round(time.time() - began, 1)}
      if host != event['host']:
        record['planned_host'] = event['host']
      if detail is None:
        record['skipped'] = 'no actor process on the fault hosts for 60 s'
      else:
        record.update(detail)
      self.done.append(record)
      print(f'chaos: {record}', flush=True)


class Pacer:
  """Keeps the run from reaching its budget before the chaos ends.

  How fast this machine runs a program varies several times over with
  what else runs on it (here 140 to 1,060 env steps/s for the same run), so
  no budget fixed at launch both outlasts the chaos and ends soon after it.
  While the counter is ahead of PACE x budget x (elapsed / chaos time), the
  learner's process is stopped (SIGSTOP; the learner is on the head, which
  no fault touches): PPO's actors then wait on its queue and its variables.
  SIGCONT when the counter falls back, and for good when the chaos ends;
  the run then plays its last (1 - PACE) of the budget without faults.
  """

  PACE = 0.9

  def __init__(self, run_dir: str, budget: int, seconds: float, start: float):
    self._run_dir = run_dir
    self._budget = budget
    self._seconds = seconds
    self._start = start
    self._stopped: Optional[int] = None
    self._since = 0.0
    self.paused_seconds = 0.0
    self.pauses = 0

  def step(self) -> None:
    elapsed = time.time() - self._start
    allowed = self.PACE * self._budget * min(1.0, elapsed / self._seconds)
    ahead = actor_steps(self._run_dir) > allowed
    if ahead and self._stopped is None:
      pid = node_records(self._run_dir).get('learner/0', {}).get('pid')
      if pid:
        try:
          os.kill(pid, signal.SIGSTOP)
          self._stopped, self._since = pid, time.time()
          self.pauses += 1
        except ProcessLookupError:
          pass
    elif not ahead:
      self.release()

  def release(self) -> None:
    if self._stopped is not None:
      try:
        os.kill(self._stopped, signal.SIGCONT)
      except ProcessLookupError:
        pass
      self.paused_seconds += time.time() - self._since
      self._stopped = None

  def figures(self) -> Dict:
    return {'pace': self.PACE, 'learner_pauses': self.pauses,
            'learner_paused_seconds': round(self.paused_seconds, 1)}


def count_rows(run_dir: str) -> Dict[str, int]:
  """Episodes and steps the actors wrote in their own metrics rows."""
  episodes = steps = 0
  for path in glob.glob(os.path.join(run_dir, 'metrics', 'actor_*.csv')):
    with open(path, newline='') as f:
      for row in csv.DictReader(f):
        try:
          steps += int(float(row['episode_length']))
          episodes += 1
        except (KeyError, TypeError, ValueError):
          pass  # A row cut short by a kill.
  return {'episodes': episodes, 'steps': steps}


def launcher_events(lines: List[str]) -> Dict[str, int]:
  text = ''.join(lines)
  return {
      'restarted_on_same_host': text.count('; restarting it ('),
      'moved_to_another_host': text.count('; restarting on '),
      'placed_again': text.count('placing it again'),
      'moves_started': text.count('placing it on a live host'),
  }


def _interrupt(signum, frame) -> None:
  del frame
  raise KeyboardInterrupt(f'stopped by signal {signum}')


def main(argv: List[str]) -> int:
  try:
    args = parse(argv)
  except BadInput as e:
    print(f'chaos.py: error: {e}', file=sys.stderr)
    return 2
  reason = netns_cluster.why_not_available()
  if reason:
    print(f'chaos.py: error: no namespace cluster here: {reason}',
          file=sys.stderr)
    return 2
  os.makedirs(args.out, exist_ok=True)
  # SIGTERM (and SIGINT, even where a shell started this in the background
  # with it ignored) ends the bench through its cleanup: no namespace left.
  signal.signal(signal.SIGTERM, _interrupt)
  signal.signal(signal.SIGINT, _interrupt)
  events = schedule(args)
  rng = random.Random(args.seed + 1)
  cluster = netns_cluster.NetnsCluster(
      [HEAD, *WORKERS], {HEAD: 3, 'b': 2, 'c': 2},
      {w: {'worker': 100} for w in WORKERS})
  run_dir = os.path.join(os.path.abspath(args.out), 'runs',
                         f'chaos-{args.seed}-{int(time.time())}')
  results = {'args': {k: v for k, v in vars(args).items()}, 'run_dir': run_dir,
             'schedule': events}
  launcher = None
  code = 1
  try:
    cluster.up()
    placement = [f'--config.resources.{group}.{field}={value}'
                 for group in STATEFUL
                 for field, value in (('ray_cpus', 0.5),
                                      ('ray_resources', f'host_{HEAD}:1'))]
    placement += ['--config.resources.actor.ray_cpus=0.5',
                  '--config.resources.actor.ray_resources=worker:1']
    command = launch_command(
        f'--config={args.config}', '--launch_type=ray',
        f'--ray_address={cluster.address}', '--progress_every=30',
        f'--workdir={os.path.dirname(run_dir)}',
        f'--run_name={os.path.basename(run_dir)}',
        '--max_node_restarts=1000000', *placement,
        f'--config.num_actors={args.actors}',
        f'--config.max_actor_steps={args.steps}',
        '--config.log_every_seconds=0.001',
        f'--config.eval_every_steps={max(1000, args.steps // 5)}',
        *args.extra)
    results['command'] = command
    launcher = subprocess.Popen(
        cluster.in_host(HEAD, command), cwd=REPO_ROOT, env=cluster.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = Lines(launcher.stdout, os.path.join(args.out, 'chaos_launcher.log'))
    stderr_chunks = []
    threading.Thread(target=lambda: stderr_chunks.append(
        launcher.stderr.read()), daemon=True).start()
    began = time.time()
    while actor_steps(run_dir) <= 0 and launcher.poll() is None:
      if time.time() - began > 600:
        raise RuntimeError('the run took over 10 minutes to step')
      time.sleep(1)
    start = time.time()
    results['startup_seconds'] = round(start - began, 1)
    stop = threading.Event()
    injector = Injector(cluster, run_dir, args, rng)
    thread = threading.Thread(target=injector.run,
                              args=(events, start, stop, launcher),
                              daemon=True)
    thread.start()
    pacer = Pacer(run_dir, args.steps, args.minutes * 60, start)
    try:
      while (launcher.poll() is None and
             time.time() < start + args.minutes * 60):
        pacer.step()
        time.sleep(1)
    finally:
      pacer.release()
    chaos_end = time.time()
    stop.set()
    thread.join()   # A fault under way completes (a host comes back).
    results['pacing'] = pacer.figures()
    results['chaos_seconds'] = round(chaos_end - start, 1)
    results['run_ended_during_chaos'] = launcher.poll() is not None
    try:
      launcher.wait(timeout=args.finish_minutes * 60)
    except subprocess.TimeoutExpired:
      launcher.send_signal(signal.SIGINT)
      launcher.wait(timeout=120)
    results['finish_seconds'] = round(time.time() - chaos_end, 1)
    out.join()
    results['launcher_exit_code'] = launcher.returncode
    results['launcher_stderr_tail'] = ''.join(stderr_chunks)[-3000:]
    results['faults'] = injector.done
    summary = layout.read_json(layout.summary_path(run_dir), {}) or {}
    results['summary'] = summary
    results['launcher_events'] = launcher_events(out.lines)
    rows = count_rows(run_dir)
    # Every actor death the launcher saw, restarted in place or moved.
    actor_deaths = sum(count for node, count in
                       (summary.get('node_restarts') or {}).items()
                       if node.startswith('actor/'))
    counter_steps = summary.get('actor_steps', 0)
    counter_episodes = summary.get('actor_episodes', 0)
    results['counting'] = {
        'counter_steps': counter_steps,
        'counter_episodes': counter_episodes,
        'actor_rows_steps': rows['steps'],
        'actor_rows_episodes': rows['episodes'],
        'counter_minus_rows': counter_steps - rows['steps'],
        'actor_deaths': actor_deaths,
        'allowed_gap': args.episode_steps * actor_deaths,
        'unreported_at_death_at_most': (args.episode_steps - 1) *
                                       actor_deaths,
        'steps_equal_episodes_x_length': (counter_steps ==
                                          counter_episodes *
                                          args.episode_steps),
    }
    gap = counter_steps - rows['steps']
    results['counting']['consistent'] = (
        0 <= gap <= args.episode_steps * actor_deaths and
        results['counting']['steps_equal_episodes_x_length'])
    # The launcher has exited: nothing of the run may be left on any host.
    deadline = time.time() + 30
    while run_processes(cluster) and time.time() < deadline:
      time.sleep(1)
    results['left_in_cluster'] = run_processes(cluster)
    results['budget_reached'] = summary.get('exit_reason') == 'budget_reached'
    code = 0
  except (RuntimeError, OSError, subprocess.SubprocessError,
          KeyboardInterrupt) as e:
    results['error'] = str(e)[-2000:] or type(e).__name__
    print(f'chaos.py: {e}', file=sys.stderr)
  finally:
    if launcher is not None and launcher.poll() is None:
      launcher.kill()
      launcher.wait()
    cluster.down()
  results['left_after_teardown'] = leftovers(cluster, run_dir)
  with open(os.path.join(args.out, 'chaos.json'), 'w') as f:
    json.dump(results, f, indent=1)
  report(results)
  if code == 0 and not (results['budget_reached'] and
                        results['counting']['consistent'] and
                        not results['left_in_cluster'] and
                        not results['left_after_teardown']):
    code = 1
  return code


def report(r: Dict) -> None:
  if 'error' in r:
    print(f'chaos run failed: {r["error"]}')
    return
  kinds = {k: [f for f in r['faults'] if f['kind'] == k] for k in KINDS}
  c, s, e = r['counting'], r['summary'], r['launcher_events']
  lines = [
      f'chaos            {r["chaos_seconds"] / 60:.1f} min (seed '
      f'{r["args"]["seed"]}); run ended during it: '
      f'{r["run_ended_during_chaos"]}',
      f'faults           process kills {len([f for f in kinds["process_kill"] if "skipped" not in f])}'
      f' (+{len([f for f in kinds["process_kill"] if "skipped" in f])} skipped), '
      f'host losses {len(kinds["host_loss"])}, link cuts '
      f'{len(kinds["link_cut"])} ({r["args"]["cut_seconds"]:g} s each)',
      f'launcher         restarts on the same host {e["restarted_on_same_host"]}, '
      f'moves {e["moved_to_another_host"]} (started {e["moves_started"]}), '
      f'placed again {e["placed_again"]}; summary node_restarts '
      f'{s.get("node_restarts")}',
      f'run              exit {r["launcher_exit_code"]}, '
      f'{s.get("exit_reason")}, actor steps {s.get("actor_steps", 0):,} / '
      f'{s.get("max_actor_steps", 0):,}; budget reached: '
      f'{r["budget_reached"]}; {r["finish_seconds"]:.0f} s after the chaos',
      f'counting         counter {c["counter_steps"]:,} steps '
      f'({c["counter_episodes"]:,} episodes); actors\' own rows '
      f'{c["actor_rows_steps"]:,} ({c["actor_rows_episodes"]:,}); '
      f'counter - rows {c["counter_minus_rows"]} (allowed 0..'
      f'{c["allowed_gap"]} for {c["actor_deaths"]} actor deaths); steps '
      f'unreported at deaths: at most {c["unreported_at_death_at_most"]}; '
      f'consistent: {c["consistent"]}',
      f'pacing           learner held {r["pacing"]["learner_paused_seconds"]:.0f} s '
      f'in {r["pacing"]["learner_pauses"]} pauses',
      f'left running     in the cluster {len(r["left_in_cluster"])}, after '
      f'teardown {len(r["left_after_teardown"])}',
  ]
  print('\n'.join(lines))
  for item in r['left_in_cluster'] + r['left_after_teardown']:
    print(f'  left: {item}')


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
