"""--launch_type=ray's checks before launch: the dry run on a real Ray cluster
of network namespaces, and the fit and address checks behind it on made-up
hosts.

The cluster is defined here, with its placement flags and `launch`, and
shared with the runs on it (tests/e2e/run/ray/test_ray_cluster.py): the dry
run starts no node, so it is no e2e test, yet needs the same cluster.
Hosts a (head), b and c each live in their own network namespace with their
own address (acme_launch/testing/cluster.py); Ray's own CLI starts them, with
token authentication on. The launcher runs in host a's namespace, as a user
on the head would. Learner, replay, counter and evaluator are pinned to host
a, actor/0 to b and actor/1 to c, through Ray custom resources. Hosts b and c
also share a resource `worker`: a node asking for it may run on either, which
is what lets a node of a lost host come back on the other. Host d does not
see the tests' temp folders (its Ray runs under a tmpfs over pytest's base
temp dir), so it does not share their run directories: only the tests that
pin nodes to it (`host_d`) use it. Host x is on the same network and runs
no Ray: another machine of the cluster network.
"""

import os
import re
import subprocess
import sys

import pytest

from acme_launch import errors
from acme_launch.run.ray import cluster as ray_cluster
from acme_launch.testing import cluster as netns_cluster
from tests.conftest import REPO_ROOT

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster

HOST_OF = {'replay/0': 'a', 'counter/0': 'a', 'learner/0': 'a',
           'evaluator/0': 'a', 'actor/0': 'b', 'actor/1': 'c'}
# Small Ray CPU demands: the namespaces share this machine's two cores.
ON_HOST_A = [f'--config.resources.{group}.{field}={value}'
             for group in ('replay', 'counter', 'learner', 'evaluator')
             for field, value in (('ray_cpus', 0.5), ('ray_resources', 'host_a:1'))]
PLACEMENT = ON_HOST_A + [
    '--config.num_actors=2', '--config.resources.node_overrides='
    'actor/0:ray_resources=host_b:1;actor/1:ray_resources=host_c:1']


def four_hosts(tmp_path_factory):
  """The cluster of this module's docstring, up until the generator is
  closed: the body of a module-scoped `cluster` fixture."""
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  hosts = netns_cluster.NetnsCluster(
      ['a', 'b', 'c', 'd'], {'a': 3, 'b': 1, 'c': 1, 'd': 3},
      {'b': {'worker': 100}, 'c': {'worker': 100}},
      private={'d': [str(tmp_path_factory.getbasetemp())]}, outsiders=['x'])
  try:
    hosts.up()
    yield hosts
  finally:
    hosts.down()


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
  yield from four_hosts(tmp_path_factory)


def launch(cluster, *args, run_dir='', budget=None, config='smoke'):
  """`launch.py --launch_type=ray ARGS` on host a, in the background."""
  argv = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
          f'--config={config}', '--launch_type=ray',
          f'--ray_address={cluster.address}', '--progress_every=5', *args]
  if run_dir:
    argv += [f'--workdir={os.path.dirname(run_dir)}',
             f'--run_name={os.path.basename(run_dir)}']
  if budget:
    argv.append(f'--config.max_actor_steps={budget}')
  return subprocess.Popen(cluster.in_host('a', argv), cwd=REPO_ROOT,
                          env=cluster.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def test_ray_dry_run_prints_a_host_for_each_node_warns_of_run_key_off_and_starts_nothing(
    cluster, tmp_path):
  # With --run_key=off, which it warns of (the same line a run gives).
  launcher = launch(cluster, *PLACEMENT, '--dry_run', '--run_key=off',
                    run_dir=str(tmp_path / 'never'))
  stdout, stderr = launcher.communicate(timeout=120)
  assert launcher.returncode == 0, stderr[-2000:]
  assert re.search(r'^warning: --run_key=off: connections between the run\'s '
                   r'hosts prove nothing; any user of those hosts reaches its '
                   r'nodes$', stdout, re.M), stdout[-3000:]
  for node, host in HOST_OF.items():
    assert re.search(rf'^  {re.escape(node)} +-> {re.escape(cluster.ips[host])} ',
                     stdout, re.M), (node, stdout[-3000:])
  assert 'the cluster can hold the plan.' in stdout
  assert not os.path.exists(tmp_path / 'never')
  assert not cluster.run_processes()


def test_a_run_key_file_others_can_read_is_one_line_exit_2_and_starts_nothing(
    cluster, tmp_path):
  # A run directory whose key (run/loopback.py) was left readable by others:
  # refused before any node's Ray actor exists, the key file named.
  from acme_launch.run import loopback
  run_dir = tmp_path / 'exposed_key'
  run_dir.mkdir(mode=0o700)
  key_path = loopback.run_key_path(str(run_dir))
  loopback.make_run_key(key_path)
  os.chmod(key_path, 0o644)
  launcher = launch(cluster, *PLACEMENT, run_dir=str(run_dir))
  _, stderr = launcher.communicate(timeout=120)
  assert launcher.returncode == 2, stderr[-2000:]
  lines = [l for l in stderr.splitlines() if l.startswith('acme-launch: error:')]
  assert lines == [f'acme-launch: error: the run key file {key_path} cannot '
                   'be used: others can read or change it (chmod 600)'], (
                       stderr[-2000:])
  assert not cluster.run_processes()


# The checks behind those lines, on made-up hosts (no cluster needed) ----------


def _host(ip, **resources):
  return ray_cluster.Host(ip, ip, resources)


def test_fit_pins_by_custom_resource_and_names_what_is_missing():
  hosts = [_host('10.0.0.1', CPU=4, gpu_host=100, GPU=1), _host('10.0.0.2', CPU=2)]
  demands = [ray_cluster.Demand('learner/0', 'learner', 1, 1, 0, (('gpu_host', 1),)),
             ray_cluster.Demand('actor/0', 'actor', 1, 0, 0, ()),
             ray_cluster.Demand('actor/1', 'actor', 1, 0, 0, ())]
  fit = ray_cluster.fit(demands, hosts)
  assert fit['learner/0'] == '10.0.0.1'
  with pytest.raises(errors.LaunchError, match=r"actor/2 \(group actor\) needs "
                     r"1 of 'ssd', and no host has 'ssd'"):
    ray_cluster.fit([ray_cluster.Demand('actor/2', 'actor', 1, 0, 0,
                                        (('ssd', 1),))], hosts)
  with pytest.raises(errors.LaunchError, match=r'learner/0 \(group learner\) '
                     r'needs 2 GPUs, and the most any host has is 1 GPU'):
    ray_cluster.fit([ray_cluster.Demand('learner/0', 'learner', 1, 2, 0, ())],
                    hosts)
  many = [ray_cluster.Demand(f'actor/{i}', 'actor', 1, 0, 0, ()) for i in range(7)]
  with pytest.raises(errors.LaunchError, match='actor/6 .* are full'):
    ray_cluster.fit(many, hosts)


def test_public_cluster_addresses_are_refused_unless_allowed():
  private = [_host(ip) for ip in ('10.1.2.3', '172.20.0.1', '192.168.1.1',
                                  '127.0.0.1', '169.254.3.4')]
  ray_cluster.check_addresses(private, allow_public=False)
  with pytest.raises(errors.LaunchError, match='203.0.113.7 has a public address'):
    ray_cluster.check_addresses([_host('203.0.113.7')], allow_public=False)
  ray_cluster.check_addresses([_host('203.0.113.7')], allow_public=True)
  with pytest.raises(errors.LaunchError, match='no IPv4 cluster address'):
    ray_cluster.check_addresses([_host('fd00::1')], allow_public=True)


def test_ray_address_comes_from_the_flag_or_ray_address(monkeypatch):
  monkeypatch.setenv('RAY_ADDRESS', '10.9.9.9:6379')
  assert ray_cluster.resolve_address('') == '10.9.9.9:6379'
  assert ray_cluster.resolve_address('auto') == 'auto'
  monkeypatch.delenv('RAY_ADDRESS')
  with pytest.raises(errors.LaunchError, match='--ray_address'):
    ray_cluster.resolve_address('')
