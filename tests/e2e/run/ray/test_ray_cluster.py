"""--launch_type=ray runs on a real Ray cluster of network namespaces: nodes
placed on their hosts and listening only there, files of hosts that do not
share the run directory, Ctrl-C, kills, lost hosts, --auto_resume.

The cluster (hosts a to d, what each is for), its placement flags and
`launch` are those of the in-process tests of the same checks,
tests/run/ray/test_ray_cluster.py; this module brings up a cluster of its own.
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from acme_launch import layout
from acme_launch.testing.launcher import LiveOutput
from tests import other_user
from tests.conftest import (REPO_ROOT, actor_steps, killed_on_exit,
                            node_records, read_json, wait_for)
from tests.run.ray.test_ray_cluster import (HOST_OF, ON_HOST_A, PLACEMENT,
                                            four_hosts, launch)

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
  yield from four_hosts(tmp_path_factory)


def _listeners(cluster, host):
  """pid -> [(ip, port)] of the TCP listeners in the host's namespace."""
  out = subprocess.run(cluster.in_host(host, ['ss', '-ltnpH']),
                       capture_output=True, text=True, check=True).stdout
  by_pid = {}
  for line in out.splitlines():
    fields = line.split()
    local = fields[3]
    ip, port = local.rsplit(':', 1)
    ip = ip.strip('[]')
    ip = ip[len('::ffff:'):] if ip.startswith('::ffff:') else ip
    for pid in re.findall(r'pid=(\d+)', line):
      by_pid.setdefault(int(pid), []).append((ip, int(port)))
  return by_pid


def _wait_running_on_every_host(cluster, launcher, run_dir):
  """Until actors step; then the run has node processes on a, b and c."""
  wait_for(lambda: actor_steps(run_dir) > 0 or launcher.poll() is not None,
           240, 'actor steps')
  assert launcher.poll() is None, launcher.communicate()[1][-3000:]
  assert {h for h, _, _ in cluster.run_processes()} == {'a', 'b', 'c'}


def _niceness(pid):
  with open(f'/proc/{pid}/stat') as f:
    return int(f.read().rsplit(')', 1)[1].split()[16])


def test_ray_run_of_a_users_own_agent_places_nodes_on_their_hosts_listens_only_on_cluster_addresses_and_reaches_budget(
    cluster, tmp_path):
  # examples/: a dueling DQN and a task of the user's own, found beside the
  # config file: every host's node processes (a, b and c) must import them.
  if not os.path.exists('/usr/bin/ss') and not os.path.exists('/bin/ss'):
    pytest.skip("no 'ss' (iproute2) to list listening sockets")
  run_dir = str(tmp_path / 'runs' / 'placed')
  launcher = launch(
      cluster, *PLACEMENT, '--config.eval_every_steps=300',
      '--config.final_eval_episodes=2',
      '--config.dueling_dqn.min_replay_size=50',
      '--config.dueling_dqn.samples_per_insert=2.0',
      run_dir=run_dir, budget=3000,
      config=os.path.join(REPO_ROOT, 'examples', 'dueling_dqn_corridor.py'))
  with killed_on_exit(launcher):
    # Once actors step, every server of the run is up.
    wait_for(lambda: actor_steps(run_dir) > 0 or launcher.poll() is not None,
             240, 'actor steps')
    assert launcher.poll() is None, launcher.communicate()[1][-3000:]
    def every_server_listening():
      records = node_records(run_dir)
      if set(records) != set(HOST_OF):
        return None
      listeners = {h: _listeners(cluster, h) for h in cluster.names}
      for node, record in records.items():
        ports = {p for _, p in listeners[HOST_OF[node]].get(record['pid'], [])}
        if not all(int(a.rsplit(':', 1)[1]) in ports
                   for a in record['server_addresses']):
          return None
      return records, listeners
    records, listeners = wait_for(every_server_listening, 120,
                                  'every server of the run listening')
    for node, record in records.items():
      host = HOST_OF[node]
      assert record['server_addresses'], node
      for address in record['server_addresses']:
        assert address.rsplit(':', 1)[0] == cluster.ips[host], (node, address)
      for ip, port in listeners[host][record['pid']]:
        # Every listening socket of the node is on its host's address.
        assert ip == cluster.ips[host], (node, ip, port)
      # Ray's workers run at niceness 15; the node runs at the launcher's.
      assert _niceness(record['pid']) == os.nice(0), node
      # Its private folder (its program, its TMPDIR), in its host's temp.
      with open(f'/proc/{record["pid"]}/environ', 'rb') as f:
        temp = dict(v.split(b'=', 1) for v in f.read().split(b'\0') if v
                    )[b'TMPDIR'].decode()
      assert os.path.dirname(temp) == cluster.host_temp(host), node
      assert os.path.basename(temp).startswith('acme-launch-node-'), node
    _, stderr = launcher.communicate(timeout=400)
  assert launcher.returncode == 0, stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['learner_steps'] > 0 and summary['evaluator_episodes'] >= 1
  assert summary['final_eval_episodes'] == 2
  by_host = {}
  for node, record in node_records(run_dir).items():
    assert record['bind_address'] == cluster.ips[HOST_OF[node]], node
    by_host.setdefault(HOST_OF[node], set()).add(record['ray_node_id'])
  # One Ray node per host, a different one for each host.
  assert all(len(ids) == 1 for ids in by_host.values())
  assert len(set().union(*by_host.values())) == 3
  for node in HOST_OF:
    assert os.path.getsize(os.path.join(
        run_dir, 'logs', node.replace('/', '_') + '.log')) > 0, node
  assert os.listdir(os.path.join(run_dir, 'checkpoints', 'learner'))
  wait_for(lambda: not cluster.run_processes(), 20, 'no process of the run left')
  # Each node's private folder went with it.
  for host in HOST_OF.values():
    assert os.listdir(cluster.host_temp(host)) == [], host


def test_ray_host_without_the_run_directory_sends_files_and_checkpoints_ctrl_c_leaves_no_process_and_resume_restores(
    cluster, tmp_path):
  # Replay, counter, learner and actor/1 on host d, which does not see the
  # run directory; actor/0 on host b, which does; the evaluator on a. The
  # first run ends with Ctrl-C, --resume takes it on to its budget.
  run_dir = str(tmp_path / 'runs' / 'unshared')
  placement = [f'--config.resources.{group}.{field}={value}'
               for group, host in (('replay', 'd'), ('counter', 'd'),
                                   ('learner', 'd'), ('evaluator', 'a'))
               for field, value in (('ray_cpus', 0.5),
                                    ('ray_resources', f'host_{host}:1'))]
  placement += ['--config.num_actors=2',
                '--config.resources.actor.ray_cpus=0.5',
                '--config.resources.actor.ray_resources=host_b:1',
                '--config.resources.node_overrides='
                'actor/1:ray_resources=host_d:1',
                '--config.checkpoint.interval_minutes=0.02']
  learner_dir = os.path.join(run_dir, 'checkpoints', 'learner')
  launcher = launch(cluster, *placement, run_dir=run_dir, budget=10**6)
  with killed_on_exit(launcher):
    # Progress and checkpoints reach the run directory from host d.
    wait_for(lambda: (actor_steps(run_dir) >= 500 and
                      glob.glob(os.path.join(learner_dir, 'ckpt-*.index')))
             or launcher.poll() is not None, 240, 'steps and a checkpoint')
    assert launcher.poll() is None, launcher.communicate()[1][-3000:]
    assert {h for h, _, _ in cluster.run_processes()} == {'a', 'b', 'd'}
    launcher.send_signal(signal.SIGINT)
    start = time.time()
    _, stderr = launcher.communicate(timeout=90)
    assert time.time() - start < 30
  # Ctrl-C: checkpoints saved, no process left on any host.
  assert launcher.returncode == 130, stderr[-3000:]
  first = read_json(os.path.join(run_dir, 'summary.json'))
  assert first['exit_reason'] == 'interrupted'
  record = node_records(run_dir)['learner/0']
  assert record['bind_address'] == cluster.ips['d']
  assert record['env']['ACME_LAUNCH_MIRROR_OF'] == run_dir
  for component in ('learner', 'counter', 'replay'):
    assert os.listdir(os.path.join(run_dir, 'checkpoints', component))
  wait_for(lambda: not cluster.run_processes(), 20, 'no process of the run left')
  newest = max(glob.glob(os.path.join(learner_dir, 'ckpt-*.index')),
               key=lambda p: int(re.findall(r'ckpt-(\d+)', p)[-1]))
  with open(newest.replace('.index', '.digest')) as f:
    newest_digest = f.read()

  launcher = launch(cluster, *placement, f'--resume={run_dir}',
                    '--show_output', budget=first['actor_steps'] + 600)
  with killed_on_exit(launcher):
    stdout, stderr = launcher.communicate(timeout=300)
  assert launcher.returncode == 0, stderr[-3000:]
  assert 'resuming from' in stdout
  second = read_json(os.path.join(run_dir, 'summary.json'))
  assert second['exit_reason'] == 'budget_reached'   # Limiter on d: shipped.
  assert second['restored_actor_steps'] >= first['actor_steps']
  assert second['learner_steps'] > first['learner_steps']  # Not from 0.
  # The learner on d restored the newest save the first run left in the run
  # directory, pushed into its new mirror (a learner that restores nothing
  # writes no learner_restore.json); so did the counter (the steps above).
  records = node_records(run_dir)
  assert set(records) == set(HOST_OF)
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert restore['checkpoint'].startswith(
      records['learner/0']['env']['ACME_LAUNCH_RUN_DIR'])
  assert os.path.basename(restore['checkpoint']) + '.index' == (
      os.path.basename(newest))
  assert restore['digest'] == newest_digest  # The very state it saved.
  # Saves go on arriving, old ones are removed as on the host (2 kept).
  assert len(glob.glob(os.path.join(learner_dir, 'ckpt-*.index'))) == 2
  assert glob.glob(os.path.join(run_dir, 'checkpoints', 'replay', '*', 'DONE'))
  # Both runs' progress rows under one header.
  with open(os.path.join(run_dir, 'metrics', 'progress.csv')) as f:
    rows = f.read().splitlines()
  assert rows.count(rows[0]) == 1
  # actor/1 wrote into a mirror on d, removed at the end; actor/0 into the
  # run directory itself.
  mirror = records['actor/1']['env']['ACME_LAUNCH_RUN_DIR']
  assert records['actor/1']['bind_address'] == cluster.ips['d']
  assert records['actor/1']['env']['ACME_LAUNCH_MIRROR_OF'] == run_dir
  assert mirror != run_dir and not os.path.exists(mirror)
  assert records['actor/0']['env']['ACME_LAUNCH_RUN_DIR'] == run_dir
  assert 'ACME_LAUNCH_MIRROR_OF' not in records['actor/0']['env']
  # Its log, metrics and TensorBoard events came over, as actor/0's did.
  for stem in ('actor_0', 'actor_1'):
    assert os.path.getsize(os.path.join(run_dir, 'logs', f'{stem}.log')) > 0
    with open(os.path.join(run_dir, 'metrics', f'{stem}.csv')) as f:
      rows = f.read().splitlines()
    # A header and at least one episode's row (under load one actor may
    # play most of the episodes), one header for both runs.
    assert 'actor_steps' in rows[0] and len(rows) >= 2, rows[:3]
    assert rows.count(rows[0]) == 1
    assert glob.glob(os.path.join(run_dir, 'metrics', 'tensorboard', stem,
                                  'events.*'))
  # --show_output echoed it, as it reached the run directory.
  assert '[actor/1] ' in stdout, stdout[-3000:]
  wait_for(lambda: not cluster.run_processes(), 20, 'no process of the run left')


def test_ray_launcher_killed_with_sigkill_leaves_no_process_on_any_host(
    cluster, tmp_path):
  # The launcher gets no chance to clean up: Ray ends the Ray actors it
  # owned when it dies, and each node process dies with its actor.
  run_dir = str(tmp_path / 'runs' / 'launcher_killed')
  launcher = launch(cluster, *PLACEMENT, run_dir=run_dir, budget=10**6)
  with killed_on_exit(launcher):
    _wait_running_on_every_host(cluster, launcher, run_dir)
    launcher.kill()
    launcher.communicate(timeout=30)
  assert launcher.returncode == -signal.SIGKILL
  wait_for(lambda: not cluster.run_processes(), 60,
           'no node process or NodeHost actor left on any host')


def test_ray_actor_killed_on_another_host_is_restarted_there_and_past_max_node_restarts_a_start_without_its_key_stops_the_run_naming_it(
    cluster, tmp_path):
  # Both actors are held at their step 200 (tests/faulty_env.py) until
  # `gate` exists, so the run cannot get far before the restarted actor is
  # seen, however slow its start. Two restarts allowed: the first after a
  # kill; the second finds its host's copy of the run key readable by
  # others and fails at start (the shim's one line, exit 2), which is past
  # its restarts: the run stops naming it (restarts.RestartPolicy).
  run_dir = str(tmp_path / 'runs' / 'restarted')
  gate = str(tmp_path / 'go')
  launcher = launch(cluster, *PLACEMENT, '--max_node_restarts=2',
                    '--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4',
                    '--config.resources.actor.extra_env='
                    f'ACME_TEST_HOLD_AT_STEP=200,ACME_TEST_HOLD_UNTIL={gate}',
                    run_dir=run_dir, budget=10**6)
  out = LiveOutput(launcher)
  with killed_on_exit(launcher):
    wait_for(lambda: actor_steps(run_dir) > 0 or launcher.poll() is not None,
             240, 'actor steps')
    assert launcher.poll() is None, out.wait(30)[-3000:]
    first = node_records(run_dir)['actor/1']
    victim = first['pid']
    assert victim in cluster.pids('c')
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: node_records(run_dir)['actor/1']['pid'] != victim or
             launcher.poll() is not None, 240, 'the restarted actor')
    assert launcher.poll() is None, out.wait(30)[-3000:]
    # Started again by its Ray actor on the same host, with new seeds.
    record = node_records(run_dir)['actor/1']
    assert record['pid'] != victim and record['pid'] in cluster.pids('c')
    assert record['env']['ACME_LAUNCH_NODE_RESTART'] == '1'
    assert record['ray_node_id'] == first['ray_node_id']
    wait_for(lambda: out.has('restarting it (1 of at most 2)'), 10,
             'the restart line')
    # The run goes on: released, the actors' counts keep arriving.
    open(gate, 'w').close()
    before = actor_steps(run_dir)
    wait_for(lambda: actor_steps(run_dir) >= before + 400 or
             launcher.poll() is not None, 240, 'steps after the restart')
    assert launcher.poll() is None, out.wait(30)[-3000:]
    # Its host's copy of the key made readable by others, then killed: its
    # second restart fails at start, past its restarts.
    key_file = record['env']['ACME_LAUNCH_RUN_KEY_FILE']
    os.chmod(key_file, 0o644)
    os.kill(record['pid'], signal.SIGKILL)
    start = time.time()
    stderr = out.wait(90)
    assert time.time() - start < 30
  line = (f'acme-launch: error: the run key file {key_file} cannot be used: '
          'others can read or change it (chmod 600)')
  assert launcher.returncode == 1, stderr[-3000:] + out.text()[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'node_failed'
  assert summary['failed_node'] == 'actor/1'
  assert summary['node_restarts'] == {'actor/1': 2}
  # The failed start wrote the shim's line alone to its log, after the
  # launcher's restart line; the launcher shows it, naming the node.
  with open(layout.log_path(run_dir, 'actor/1')) as f:
    after = f.read().rsplit('restarting it (2 of at most 2)', 1)[1]
  assert [l for l in after.splitlines() if l.strip()] == [line], after
  assert line in stderr + out.text()
  wait_for(lambda: not cluster.run_processes(), 20, 'no process of the run left')


def _intruder(cluster, host, target_ip, ports, sentinel, uid=0, base='',
              env=None):
  """tests/intruder.py from `host`'s namespace against `ports` at
  `target_ip`, in the background: as root (the run's own user), with `env`
  if given, or as `uid` (its home in `base`)."""
  argv = [sys.executable, '-m', 'tests.intruder', f'--host={target_ip}',
          '--ports=' + ','.join(map(str, ports)), f'--sentinel={sentinel}']
  if uid:
    argv = other_user.command(uid, argv, base)
    env = other_user.environment(other_user.home_of(uid, base))
  return subprocess.Popen(cluster.in_host(host, argv), cwd=REPO_ROOT,
                          env=env or cluster.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def _environ(pid):
  with open(f'/proc/{pid}/environ', 'rb') as f:
    return dict(item.decode().split('=', 1)
                for item in f.read().split(b'\0') if item)


def _as_the_node(cluster, pid):
  """The environment of a client that is one of node `pid`'s own: its
  shim, its host's address, the run's hosts and the run's key."""
  node = _environ(pid)
  names = ('LD_PRELOAD', 'ACME_LAUNCH_BIND_ADDRESS', 'ACME_LAUNCH_HOSTS_FILE',
           'ACME_LAUNCH_RUN_KEY_FILE')
  return dict(cluster.env, **{name: node[name] for name in names})


def _found(intruder):
  out, err = intruder.communicate(timeout=180)
  assert intruder.returncode == 0, err[-3000:]
  return json.loads(out.strip().splitlines()[-1])['ports']


# Bytes a plain connection gets back after HTTP/2's client preface (a gRPC
# server sends its SETTINGS frame at once); 0 when the server's side closed
# or reset it unanswered. A connection that cannot be made is an error.
_RAW_BYTES = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)
s.settimeout(5)
try:
  s.sendall(b'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n')
  print(len(s.recv(64)))
except (ConnectionResetError, BrokenPipeError):
  print(0)
"""


def _hosts_file_of(pid):
  """The run's hosts as the shim of node process `pid` reads them."""
  with open(f'/proc/{pid}/environ', 'rb') as f:
    env = dict(item.split(b'=', 1) for item in f.read().split(b'\0') if item)
  with open(env[b'ACME_LAUNCH_HOSTS_FILE']) as f:
    return f.read().split()


def test_ray_host_lost_its_actor_comes_back_on_the_other_host_only_the_runs_hosts_get_in_and_with_both_hosts_lost_it_waits_for_the_first_back(
    cluster, tmp_path, request):
  # One actor, on whichever of b and c Ray picks, held at its step 250
  # (tests/faulty_env.py) until `gate` exists: each check below sees the
  # run live. Host x is another machine of the cluster network, host d a
  # Ray host of the cluster that runs none of the run's nodes.
  # Then, with the lost host back, the race of a lost host: Ray declares a
  # host dead only after several missed health checks, and until then may
  # place a new actor on it. With b and c both killed, every host with
  # `worker` is dead while Ray still lists both alive: a replacement Ray
  # placed would die with its host. The launcher must keep it off both
  # until one comes back (a new Ray node on the same address), then run it
  # there, as its restart 2, not 3.
  run_dir = str(tmp_path / 'runs' / 'moved')
  gate = str(tmp_path / 'go')
  launcher = launch(cluster, *ON_HOST_A, '--config.num_actors=1',
                    '--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4',
                    '--config.resources.actor.ray_cpus=0.5',
                    '--config.resources.actor.ray_resources=worker:1',
                    '--config.resources.actor.extra_env='
                    f'ACME_TEST_HOLD_AT_STEP=250,ACME_TEST_HOLD_UNTIL={gate}',
                    run_dir=run_dir, budget=3000)
  host_by_ip = {ip: host for host, ip in cluster.ips.items()}
  head = cluster.ips['a']
  out = LiveOutput(launcher)
  down = set()   # Hosts killed and not yet back.
  with killed_on_exit(launcher):
    wait_for(lambda: actor_steps(run_dir) >= 200 or launcher.poll() is not None,
             240, 'the actor held at its step 250')
    assert launcher.poll() is None, out.wait(30)[-3000:]
    records = node_records(run_dir)
    first = records['actor/0']
    lost = host_by_ip[first['bind_address']]
    other = {'b': 'c', 'c': 'b'}[lost]
    ports = sorted(int(address.rsplit(':', 1)[1])
                   for node in ('learner/0', 'replay/0', 'counter/0')
                   for address in records[node]['server_addresses'])
    sentinel = {h: str(tmp_path / f'decoded-from-{h}') for h in 'adx'}
    # The same attempts from hosts x and d and, as a control, from host a;
    # and from the actor's own host (one of the run's): as another user
    # (uid 65534), as the run's user without the run's key, and, the
    # control, with it (as the actor's node process itself would dial).
    base = other_user.shared_folder()
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    for who in ('nobody', 'no_key', 'key'):
      sentinel[who] = os.path.join(base, f'decoded-for-{who}')
    tries = {h: _intruder(cluster, h, head, ports, sentinel[h]) for h in 'adx'}
    tries['nobody'] = _intruder(cluster, lost, head, ports, sentinel['nobody'],
                                uid=other_user.NOBODY, base=base)
    tries['no_key'] = _intruder(cluster, lost, head, ports, sentinel['no_key'])
    tries['key'] = _intruder(cluster, lost, head, ports, sentinel['key'],
                             env=_as_the_node(cluster, first['pid']))
    found = {h: _found(intruder) for h, intruder in tries.items()}
    assert sorted(_hosts_file_of(records['learner/0']['pid'])) == sorted(
        [head, cluster.ips[lost]])
    steps_before = actor_steps(run_dir)
    try:
      # Every process of the host at once (raylet, Ray actor, node): lost.
      down.add(lost)
      cluster.kill_hosts([lost], signals=(signal.SIGKILL,))
      # The actor comes back on the other host, steps (its counts reach
      # the counter on host a) and is held again at its step 250.
      wait_for(lambda: (actor_steps(run_dir) >= steps_before + 100 or
                        launcher.poll() is not None), 240,
               'the moved actor stepping')
      assert launcher.poll() is None, out.wait(30)[-3000:]
      moved_hosts = _hosts_file_of(records['learner/0']['pid'])
      moved = node_records(run_dir)['actor/0']
      from_lost = subprocess.run(cluster.in_host(lost, [
          sys.executable, '-c', _RAW_BYTES, head, str(ports[0])]),
                                 capture_output=True, text=True, timeout=60)
      cluster.start_ray(lost)
      down.discard(lost)
      # Both b and c at once; `lost` is the first back.
      down.update(('b', 'c'))
      cluster.kill_hosts(['b', 'c'], signals=(signal.SIGKILL,))
      open(gate, 'w').close()
      wait_for(lambda: out.has(f'node actor/0: host {cluster.ips[other]} '
                               'lost; placing it on a live host') or
               launcher.poll() is not None, 60, 'the second move')
      assert launcher.poll() is None, out.text()[-3000:]
      time.sleep(3)  # Ray still lists b and c alive; nothing may start.
      assert sum('restarting on' in line for line in list(out.lines)) == 1, (
          out.text()[-3000:])
      cluster.start_ray(lost)
      down.discard(lost)
      stderr = out.wait(240)
    finally:
      for host in sorted(down):
        cluster.start_ray(host)  # Back for the tests after this one.
  stdout = out.text()
  assert launcher.returncode == 0, stderr[-3000:] + stdout[-3000:]
  # Hosts x and d, and on the actor's host another user or the run's user
  # without the run's key: not one byte, call or decoded object from any
  # server. With the key, from there: every answer, the attack's included.
  for host in ('x', 'd', 'nobody', 'no_key'):
    for port, answers in found[host].items():
      assert answers == {'raw': False, 'methods': None, 'get_variables': False,
                         'get_counts': False, 'server_info': False}, (
                             host, port, answers)
    assert not os.path.exists(sentinel[host])
  # Host a, the run's user: every server answers, the attack itself works.
  for who in ('a', 'key'):
    insider = found[who]
    assert all(answers['raw'] for answers in insider.values()), (who, insider)
    for call in ('get_variables', 'get_counts', 'server_info'):
      assert any(answers[call] for answers in insider.values()), (who, insider)
    assert os.path.exists(sentinel[who]), who
  # After the move the lost host is off the list and the new one on it.
  assert sorted(moved_hosts) == sorted([head, cluster.ips[other]])
  assert from_lost.stdout.split() == ['0'], (from_lost.stdout, from_lost.stderr)
  assert (f'node actor/0: host {cluster.ips[lost]} lost; restarting on '
          f'{cluster.ips[other]} (1 of at most 3)') in stdout, stdout[-3000:]
  # Its record said where it ran then: the other host's Ray node, address
  # and a server address there, restarted once, moved from the lost host.
  assert moved['bind_address'] == cluster.ips[other]
  assert moved['ray_node_id'] != first['ray_node_id']
  assert [a.rsplit(':', 1)[0] for a in moved['server_addresses']] == [
      cluster.ips[other]]
  assert moved['env']['ACME_LAUNCH_NODE_RESTART'] == '1'
  assert moved['env']['ACME_LAUNCH_MOVED_FROM'] == cluster.ips[lost]
  # Both lost: it came back on the first host to return, as restart 2.
  assert (f'node actor/0: host {cluster.ips[other]} lost; restarting on '
          f'{cluster.ips[lost]} (2 of at most 3)') in stdout, stdout[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['node_restarts'] == {'actor/0': 2}
  record = node_records(run_dir)['actor/0']
  assert record['bind_address'] == cluster.ips[lost]
  assert record['ray_node_id'] not in (first['ray_node_id'],
                                       moved['ray_node_id'])
  assert record['env']['ACME_LAUNCH_MOVED_FROM'] == cluster.ips[other]
  wait_for(lambda: not cluster.run_processes(), 20, 'no process of the run left')


def test_ray_learner_on_another_host_than_its_replay_samples_through_the_run_key_and_the_run_reaches_its_budget(
    cluster, tmp_path):
  # The learner's dataset (Reverb's TF ops, its own copy of gRPC) and its
  # Courier clients dial replay and counter on host a from host c, the
  # actor from host b: every one of those connections proves the run's key.
  run_dir = str(tmp_path / 'runs' / 'learner_apart')
  placement = [f'--config.resources.{group}.{field}={value}'
               for group, host in (('replay', 'a'), ('counter', 'a'),
                                   ('evaluator', 'a'), ('learner', 'c'),
                                   ('actor', 'b'))
               for field, value in (('ray_cpus', 0.5),
                                    ('ray_resources', f'host_{host}:1'))]
  launcher = launch(cluster, *placement, '--config.num_actors=1',
                    run_dir=run_dir, budget=1500)
  with killed_on_exit(launcher):
    _, stderr = launcher.communicate(timeout=400)
  assert launcher.returncode == 0, stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['learner_steps'] > 0
  records = node_records(run_dir)
  assert records['learner/0']['bind_address'] == cluster.ips['c']
  assert records['replay/0']['bind_address'] == cluster.ips['a']
  # The key by its path only, a file of its host's private folder.
  key_file = records['learner/0']['env']['ACME_LAUNCH_RUN_KEY_FILE']
  assert os.path.basename(key_file) == 'run_key', key_file
  assert os.path.dirname(os.path.dirname(key_file)) == cluster.host_temp('c')
  wait_for(lambda: not cluster.run_processes(), 20, 'no process of the run left')


def test_unreachable_ray_address_is_one_line_exit_2_within_10_seconds(
    cluster, tmp_path):
  nobody = f'{cluster.subnet}.250:6379'  # In the cluster's subnet, no host.
  start = time.time()
  result = subprocess.run(
      cluster.in_host('a', [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
                            '--config=smoke', '--launch_type=ray',
                            f'--ray_address={nobody}',
                            f'--workdir={tmp_path}', '--run_name=never']),
      cwd=REPO_ROOT, env=cluster.env, capture_output=True, text=True,
      timeout=60)
  assert time.time() - start < 10
  assert result.returncode == 2
  errors_seen = [l for l in result.stderr.splitlines()
                 if l.startswith('acme-launch: error:')]
  assert len(errors_seen) == 1 and nobody in errors_seen[0], result.stderr[-2000:]
  assert not os.path.exists(tmp_path / 'never')


def test_plan_the_cluster_cannot_hold_is_one_line_naming_the_group_exit_2(
    cluster, tmp_path):
  launcher = launch(cluster, '--config.resources.learner.ray_resources=gpu_host:1',
                    run_dir=str(tmp_path / 'never'))
  _, stderr = launcher.communicate(timeout=120)
  assert launcher.returncode == 2
  lines = [l for l in stderr.splitlines() if l.startswith('acme-launch: error:')]
  assert len(lines) == 1, stderr[-2000:]
  assert 'learner' in lines[0] and "'gpu_host'" in lines[0]
  assert not os.path.exists(tmp_path / 'never')
  assert not cluster.run_processes()


def test_bind_shim_puts_wildcard_binds_on_the_given_address_only():
  from acme_launch.run import loopback
  path = loopback.ensure()
  # 127.0.0.2 is on `lo` (all of 127/8 is): wildcard binds land there.
  loopback.verify(path, '127.0.0.2')
  # An address no interface has: the bind fails, it never goes wildcard.
  with pytest.raises(loopback.Unavailable, match='Cannot assign requested address'):
    loopback.verify(path, '10.255.255.254')
  env = dict(os.environ, LD_PRELOAD=path,
             ACME_LAUNCH_BIND_ADDRESS='not-an-address')
  probe = ("import socket; s = socket.socket(); s.bind(('0.0.0.0', 0))")
  result = subprocess.run([sys.executable, '-S', '-c', probe], env=env,
                          capture_output=True, text=True, check=False)
  assert result.returncode != 0 and 'Cannot assign' in result.stderr
