"""--sweep's parts without processes: points parsed, slots cut from cores and
GPUs, a point checked on its slot, cluster sizing (real sweeps:
tests/e2e/sweep/)."""

import os
import re

import pytest

from acme_launch.sweep import points as sweep_points
from acme_launch.sweep import slots as sweep_slots


def test_points_slots_and_names_without_processes():
  assert sweep_points.parse_specs(['ppo.learning_rate=3e-4,1e-3;seed=0,1']) == [
      ('ppo.learning_rate', ['3e-4', '1e-3']), ('seed', ['0', '1'])]
  assert sweep_points.parse_specs(['network.policy_layers=(8,8),(16,16)']) == [
      ('network.policy_layers', ['(8,8)', '(16,16)'])]
  slots = sweep_slots.make_slots(3, range(8), range(4), uses_gpus=True)
  assert [s.cores for s in slots] == [(0, 1), (2, 3, 4), (5, 6, 7)]
  assert [s.gpus for s in slots] == [(0,), (1,), (2, 3)]
  assert [s.gpus for s in sweep_slots.make_slots(2, range(4), range(4), False)] == [(), ()]
  assert sweep_slots.host_capacity(range(16), range(2), uses_gpus=True) == 2
  assert sweep_slots.host_capacity(range(16), range(2), uses_gpus=False) == 16
  assert sweep_points.safe_name('env_name=gymnasium:Hopper-v5/x') == 'env_name=gymnasium_Hopper-v5_x'


def test_a_point_is_checked_on_a_slot_given_as_a_value_not_by_changing_this_process(
    tmp_path):
  # A sweep checks each point as a child in its smallest slot will see the
  # host: that slot's cores and the sweep's folder for relative paths, handed
  # to the planner as a value; this process keeps its own.
  from acme_launch import prepare
  from acme_launch.plan import host as host_lib
  (tmp_path / 'mine.py').write_text(
      'from acme_launch.configs import smoke\n'
      'def get_config():\n  return smoke.get_config()\n')
  cwd, cores = os.getcwd(), os.sched_getaffinity(0)
  slot = host_lib.HostSlice(cores=(0,), visible_gpus='', cwd=str(tmp_path))
  launch = prepare.check_arguments(
      ['launch.py', '--config=mine.py', '--config.num_actors=1'
      ], slot)
  assert launch.config_name == 'mine'
  assert re.search(r"of the launcher's 0(?![-,\d])", launch.plan.cpu_note), (
      launch.plan.cpu_note)
  assert (os.getcwd(), os.sched_getaffinity(0)) == (cwd, cores)


def _demands(cpus, count, memory_mb=0, custom=()):
  from acme_launch.run.ray import cluster as ray_cluster
  return tuple(ray_cluster.Demand(f'n/{i}', 'g', cpus, 0, memory_mb, custom)
               for i in range(count))


def _host(ip, **resources):
  from acme_launch.run.ray import cluster as ray_cluster
  return ray_cluster.Host(ip, ip, resources)


def test_cluster_slots_come_from_how_many_points_the_hosts_hold():
  from acme_launch import errors
  five = _demands(1.0, 5)
  hosts = [_host('10.0.0.1', CPU=0), _host('10.0.0.2', CPU=5),
           _host('10.0.0.3', CPU=5)]
  # Two hosts of five CPUs: two points of five one-CPU nodes at once.
  assert sweep_slots.cluster_concurrency(0, [five] * 4, hosts, 'h:1') == (2, 2)
  assert sweep_slots.cluster_concurrency(1, [five] * 4, hosts, 'h:1') == (1, 2)
  # Fewer points than the cluster holds: all of them.
  assert sweep_slots.cluster_concurrency(0, [five], hosts, 'h:1') == (1, 1)
  # 3 CPUs per host: a point's nodes on two hosts, then one CPU left on each.
  three = [_host('a', CPU=3), _host('b', CPU=3)]
  assert sweep_slots.cluster_concurrency(0, [five] * 3, three, 'h:1') == (1, 1)
  # Memory and custom resources count as CPUs do.
  big = _demands(0.5, 2, memory_mb=1024, custom=(('worker', 1.0),))
  hosts = [_host('a', CPU=8, memory=3 * 2**30, worker=100),
           _host('b', CPU=8, memory=2**30, worker=100)]
  assert sweep_slots.cluster_concurrency(0, [big] * 5, hosts, 'h:1') == (2, 2)
  with pytest.raises(errors.LaunchError, match=(
      r'--max_concurrent=3: the Ray cluster at h:1 holds 2 of these programs '
      r'at once \(each asks 1 CPU, 2,048 MB of memory, 2 of .worker.\)')):
    sweep_slots.cluster_concurrency(3, [big] * 5, hosts, 'h:1')
  slots = sweep_slots.cluster_slots(2, 'h:1')
  assert [s.cluster for s in slots] == ['h:1', 'h:1']
  assert sweep_slots.describe_slot(slots[0]) == 'the Ray cluster at h:1'
