"""--sweep with --launch_type=ray: the points' programs on a Ray cluster made
of network namespaces (acme_launch/testing/cluster.py).

The head, host a, has no CPU for Ray: the launcher runs there, as a user on
the head would, and no node can. Hosts b and c have five Ray CPUs each, what
one smoke point's five nodes ask (one each): the cluster holds two points at
once, and a third waits. The points run here are a population
(--sweep_scheduler=pbt) of two, both programs at once on the cluster, the
one that copies the other started again from the copied learner.
"""

import os
import subprocess
import sys

import pytest

from acme_launch.sweep.record import final_return
from acme_launch.testing import cluster as netns_cluster
from tests.conftest import REPO_ROOT, node_records, read_json, wait_for

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster


@pytest.fixture(scope='module')
def cluster():
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  hosts = netns_cluster.NetnsCluster(['a', 'b', 'c'], {'a': 0, 'b': 5, 'c': 5})
  try:
    hosts.up()
    yield hosts
  finally:
    hosts.down()


def _sweep(cluster, workdir, *args, timeout=120):
  argv = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
          '--config=smoke', '--launch_type=ray',
          f'--ray_address={cluster.address}', f'--workdir={workdir}', *args]
  return subprocess.run(cluster.in_host('a', argv), cwd=REPO_ROOT,
                        env=cluster.env, capture_output=True, text=True,
                        timeout=timeout, check=False)


def test_a_population_on_the_cluster_runs_two_members_at_once_and_one_copies(
    cluster, workdir):
  # A population of two (--sweep_scheduler=pbt) on a task any learner
  # improves on at once (tests/bandit_env.py): the member that cannot learn
  # copies the other's learner at the comparison. Its checkpoints live in
  # its run directory on this host (run/ray/files.py), pushed to wherever
  # Ray places its learner when it resumes.
  result = _sweep(cluster, workdir, '--sweep=ppo.learning_rate=0.003,0.0',
                  '--config.env_name=tests.bandit_env:PushBandit-v0',
                  '--config.env_max_episode_steps=10',
                  # A boundary far enough from the budget that a member
                  # whose program started late on the cluster reaches it
                  # before the other ends.
                  '--sweep_scheduler=pbt', '--pbt_interval_steps=8000',
                  # On a cluster the copy is the donor's latest periodic
                  # save: one every 6 s, so the first boundary has one.
                  '--config.checkpoint.interval_minutes=0.1',
                  '--run_name=population', '--config.max_actor_steps=16000',
                  '--progress_every=5', timeout=600)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  sweep_dir = os.path.join(workdir, 'population')
  assert f'2 at once on the Ray cluster at {cluster.address}' in result.stdout
  record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  assert record['ray_cluster']['holds'] == 2
  assert record['members_at_once']
  learner, frozen = [p['launches'] for p in record['points']]
  # Both members' programs ran at once, through to their budgets but for
  # the copy: one launch each, and the frozen one's second from the copy.
  assert len(learner) == 1 and len(frozen) == 2
  assert learner[0]['started'] < frozen[0]['ended']
  assert frozen[0]['started'] < learner[0]['ended']
  [exploit] = record['population']['exploits']
  assert exploit['member'] == 'ppo.learning_rate=0.0'
  assert exploit['copied'] == 'ppo.learning_rate=0.003'
  assert frozen[0]['exit_reason'] == 'copies ppo.learning_rate=0.003'
  assert frozen[1]['exit_reason'] == 'budget_reached'
  # Members run through without waiting on a cluster: the frozen one may
  # reach its budget before the comparison stops it (its program started
  # first). Then it ends with its own learner, its second launch finding
  # nothing to do, and the exploit is kept as dropped.
  dropped = exploit.get('dropped')
  assert dropped in (None, 'it had reached its budget'), exploit
  assert (frozen[1]['copied'] is None) == bool(dropped), frozen[1]
  if not dropped:
    assert frozen[1]['copied']['point'] == 'ppo.learning_rate=0.003'
    assert exploit['learner_copied'], exploit
  hosts_of = {}
  for point in ('ppo.learning_rate=0.003', 'ppo.learning_rate=0.0'):
    run_dir = os.path.join(sweep_dir, point)
    summary = read_json(os.path.join(run_dir, 'summary.json'))
    assert summary['exit_reason'] == 'budget_reached', point
    assert summary['actor_steps'] >= 16000
    records = node_records(run_dir)
    assert len(records) == 5, sorted(records)
    hosts_of[point] = [r['bind_address'] for r in records.values()]
  # The copied learner reached the frozen member: it now scores as the
  # learner did, not as it did itself.
  frozen_summary = read_json(os.path.join(
      sweep_dir, 'ppo.learning_rate=0.0', 'summary.json'))
  if dropped:
    assert 'reached its budget before it stopped to copy' in result.stdout
    assert abs(final_return(frozen_summary)) < 2.0, frozen_summary
  else:
    assert (frozen_summary['final_eval_return_mean'] >
            exploit['member_return'] + 2.0), (frozen_summary, exploit)
  # Each member's last program: five one-CPU nodes on the two hosts of
  # five CPUs, none on the head (where they land depends on what else ran
  # when the copying member started again).
  placed = [ip for ips in hosts_of.values() for ip in ips]
  assert len(placed) == 10
  assert set(placed) <= {cluster.ips['b'], cluster.ips['c']}, placed
  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  assert all(r['budget_reached'] and r['final_return'] is not None
             for r in table['points'])
  assert table['failed'] == []
  wait_for(lambda: not cluster.run_processes(), 20,
           'no process of the sweep left')


def test_ray_sweep_dry_run_says_how_many_points_the_cluster_holds_and_why(
    cluster, workdir):
  result = _sweep(cluster, workdir, '--sweep=seed=0,1,2', '--dry_run')
  assert result.returncode == 0, result.stderr[-3000:]
  assert '3 to run, 2 at once' in result.stdout
  assert (f'Ray cluster at {cluster.address}: 3 hosts' in result.stdout and
          "a point's nodes ask 5 CPUs" in result.stdout and
          'the cluster holds 2 of these points at once: 2 at once, the rest '
          'wait for room.' in result.stdout), result.stdout
  assert os.listdir(workdir) == []
  # Bad input: more at once than the cluster holds.
  result = _sweep(cluster, workdir, '--sweep=seed=0,1,2', '--max_concurrent=3')
  assert result.returncode == 2, result.stdout + result.stderr
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith('acme-launch: error:'), lines
  assert (f'--max_concurrent=3: the Ray cluster at {cluster.address} holds 2'
          in lines[0])
  assert os.listdir(workdir) == []
