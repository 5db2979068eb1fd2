"""Network faults, and a killed learner then its lost host, on a namespace
Ray cluster.

Hosts a (head; the launcher runs here), b and c (acme_launch/testing/cluster.py).
b and c share `worker` (actors) and `state` (a second home for the stateful
nodes, so a program whose learner's host is lost can come back on the other).
Ray's own health checks run at their defaults here: a host is declared dead
after 5 failed checks (docs/ray-faults.md), about a minute for a cut link.
"""

import glob
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import LiveOutput
from tests.conftest import (REPO_ROOT, actor_steps, killed_on_exit,
                            node_records, read_json, wait_for)
from tests.run.ray.test_ray_cluster import ON_HOST_A

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster

ONE_WORKER_ACTOR = ['--config.num_actors=1',
                    '--config.resources.actor.ray_cpus=0.5',
                    '--config.resources.actor.ray_resources=worker:1']


@pytest.fixture(scope='module')
def cluster():
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  hosts = netns_cluster.NetnsCluster(
      ['a', 'b', 'c'], {'a': 3, 'b': 2, 'c': 2},
      {'b': {'worker': 100, 'state': 100}, 'c': {'worker': 100, 'state': 100}})
  try:
    hosts.up()
    yield hosts
  finally:
    hosts.down()


def _launch(cluster, run_dir, budget, *args):
  argv = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
          '--config=smoke', '--launch_type=ray',
          f'--ray_address={cluster.address}', '--progress_every=5',
          f'--workdir={os.path.dirname(run_dir)}',
          f'--run_name={os.path.basename(run_dir)}',
          f'--config.max_actor_steps={budget}', *args]
  return subprocess.Popen(cluster.in_host('a', argv), cwd=REPO_ROOT,
                          env=cluster.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def _wait_or_show(launcher, condition, timeout, what):
  """wait_for; at its timeout the launcher is killed and the failure shows
  what it printed."""
  try:
    return wait_for(condition, timeout, what)
  except TimeoutError:
    launcher.kill()
    stdout, stderr = launcher.communicate(timeout=60)
    raise AssertionError(f'timed out after {timeout} s waiting for {what}; '
                         f'the launcher printed:\n{stdout[-3000:]}\n'
                         f'{stderr[-6000:]}') from None


def _held_at(step, gate):
  """Flags that hold each actor at its own step `step` until `gate`
  exists (tests/faulty_env.py)."""
  return ['--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4',
          '--config.resources.actor.extra_env='
          f'ACME_TEST_HOLD_AT_STEP={step},ACME_TEST_HOLD_UNTIL={gate}']


def _cut(cluster, host, seconds):
  veth = f'{cluster.tag}{host}'
  subprocess.run(['ip', 'link', 'set', veth, 'down'], check=True)
  try:
    time.sleep(seconds)
  finally:
    subprocess.run(['ip', 'link', 'set', veth, 'up'], check=True)


def _alive(pid):
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except OSError:
    return False


def _raylet_running(cluster, host):
  for pid in cluster.pids(host):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        if b'raylet/raylet' in f.read():
          return True
    except OSError:
      pass
  return False


def _host_of(cluster, ip):
  return {v: k for k, v in cluster.ips.items()}[ip]


def test_ray_link_cut_briefly_changes_nothing_and_cut_long_moves_the_actor_and_kills_the_stale_one(
    cluster, tmp_path):
  # The actor (tests/faulty_env.py) is held at its step 3000 until `gate`
  # exists: neither it nor the moved one can take the run to its budget
  # before the move is seen, however fast this machine is today.
  run_dir = str(tmp_path / 'runs' / 'cut')
  gate = str(tmp_path / 'go')
  launcher = _launch(cluster, run_dir, 6500, *ON_HOST_A, *ONE_WORKER_ACTOR,
                     *_held_at(3000, gate))
  out = LiveOutput(launcher)
  cut_host = None
  with killed_on_exit(launcher):
    try:
      wait_for(lambda: actor_steps(run_dir) > 0 or launcher.poll() is not None,
               240, 'actor steps')
      assert launcher.poll() is None, launcher.communicate()[1][-3000:]
      first = node_records(run_dir)['actor/0']
      cut_host = _host_of(cluster, first['bind_address'])
      other = {'b': 'c', 'c': 'b'}[cut_host]
      # Brief: its actor cannot reach replay or the counter for 5 s.
      _cut(cluster, cut_host, 5)
      before = actor_steps(run_dir)
      wait_for(lambda: actor_steps(run_dir) > before or launcher.poll() is not None,
               60, 'steps after the brief cut')
      assert launcher.poll() is None, out.text()[-3000:]
      assert _alive(first['pid'])
      assert node_records(run_dir)['actor/0']['pid'] == first['pid']
      assert not out.has('actor/0'), out.text()[-3000:]
      # Long: past the launcher's call timeout (30 s), within Ray's
      # detector (about a minute for a cut link): Ray still lists the host.
      _cut(cluster, cut_host, 42)
      wait_for(lambda: out.has('restarting on') or launcher.poll() is not None,
               120, 'the move')
      # Back on the link, the old host's NodeHost and its node die: Ray
      # kills the actor the launcher gave up (or, had its detector declared
      # the host dead, the host's raylet exits, and its workers with it).
      wait_for(lambda: not _alive(first['pid']), 90, 'the stale node to die')
      open(gate, 'w').close()
      _, stderr = launcher.communicate(timeout=300)
    finally:
      if cut_host:
        subprocess.run(['ip', 'link', 'set', f'{cluster.tag}{cut_host}', 'up'],
                       check=False)
        if not _raylet_running(cluster, cut_host):
          cluster.kill_hosts([cut_host], signals=(signal.SIGKILL,))
          cluster.start_ray(cut_host)
  stdout = out.text()
  assert launcher.returncode == 0, stderr[-3000:] + stdout[-3000:]
  assert (f'node actor/0: host {cluster.ips[cut_host]} lost; restarting on '
          f'{cluster.ips[other]} (1 of at most 3)') in stdout, stdout[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['node_restarts'] == {'actor/0': 1}   # The long cut only.
  assert node_records(run_dir)['actor/0']['bind_address'] == cluster.ips[other]
  wait_for(lambda: not cluster.run_processes(), 30, 'no process of the run left')


def test_ray_learner_killed_then_its_host_lost_with_auto_resume_resumes_each_time_from_its_checkpoints(
    cluster, tmp_path):
  # Replay, counter and learner ask for `state`, which b and c
  # both have; the launcher (on a) and the actor and evaluator stay on a.
  # First the learner's process is killed (its host lives on), then, once
  # the program resumed, the whole host of the new learner is lost.
  run_dir = str(tmp_path / 'runs' / 'state_lost')
  placement = [f'--config.resources.{group}.{field}={value}'
               for group, where in (('replay', 'state'), ('counter', 'state'),
                                    ('learner', 'state'),
                                    ('evaluator', 'host_a'))
               for field, value in (('ray_cpus', 0.5),
                                    ('ray_resources', f'{where}:1'))]
  placement += ['--config.resources.actor.ray_cpus=0.5',
                '--config.resources.actor.ray_resources=host_a:1',
                '--config.checkpoint.interval_minutes=0.02',
                '--auto_resume=2']
  # The actor (on a) is held at its own step 2000 until `gate` exists: the
  # first two attempts together cannot come near the budget before the
  # learner's host is lost.
  gate = str(tmp_path / 'go')
  launcher = _launch(cluster, run_dir, 5000, *placement, *_held_at(2000, gate))
  learner_dir = os.path.join(run_dir, 'checkpoints', 'learner')
  restore_path = os.path.join(run_dir, 'nodes', 'learner_restore.json')
  state_hosts = {cluster.ips['b'], cluster.ips['c']}
  lost = None
  with killed_on_exit(launcher):
    try:
      wait_for(lambda: (glob.glob(os.path.join(learner_dir, 'ckpt-*.index'))
                        and actor_steps(run_dir) > 0) or launcher.poll() is not None,
               240, 'a learner checkpoint')
      assert launcher.poll() is None, launcher.communicate()[1][-3000:]
      # A fresh run's learner restores nothing: no learner_restore.json.
      assert not os.path.exists(restore_path)
      victim = node_records(run_dir)['learner/0']['pid']
      os.kill(victim, signal.SIGKILL)
      # The second attempt's learner, on a host with `state`, started from
      # the first attempt's checkpoint.
      _wait_or_show(launcher, lambda: (
          os.path.exists(restore_path) and
          node_records(run_dir)['learner/0']['pid'] != victim)
                    or launcher.poll() is not None, 240, 'the resumed learner')
      assert launcher.poll() is None, launcher.communicate()[1][-3000:]
      first = node_records(run_dir)['learner/0']
      assert first['bind_address'] in state_hosts
      resumed_from = read_json(restore_path)
      assert os.path.basename(resumed_from['checkpoint']).startswith('ckpt-')
      lost = _host_of(cluster, first['bind_address'])
      assert actor_steps(run_dir) < 4500, 'the budget came too close to test'
      cluster.kill_hosts([lost], signals=(signal.SIGKILL,))
      open(gate, 'w').close()
      stdout, stderr = launcher.communicate(timeout=300)
    finally:
      if lost:
        cluster.start_ray(lost)
  assert launcher.returncode == 0, stderr[-3000:]
  assert 'node learner/0 failed; resuming the whole program' in stderr
  assert '--auto_resume: 1 of 2' in stderr and '--auto_resume: 2 of 2' in stderr
  # Then the first of the lost host's stateful nodes the launcher saw gone.
  assert re.search(r'node (learner|replay|counter)/0 failed; resuming the '
                   r'whole program from its last checkpoints \(--auto_resume: '
                   r'2 of 2\)', stderr), stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached', summary
  assert summary['auto_resumes'] == 2
  other = {'b': 'c', 'c': 'b'}[lost]
  record = node_records(run_dir)['learner/0']
  assert record['bind_address'] == cluster.ips[other]
  assert record['ray_node_id'] != first['ray_node_id']
  restore = read_json(restore_path)
  assert os.path.basename(restore['checkpoint']).startswith('ckpt-')
  wait_for(lambda: not cluster.run_processes(), 30, 'no process of the run left')
