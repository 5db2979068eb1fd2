"""bench/cluster.py run tiny: local_mp and Ray side by side, the Ray rounds
on a cluster of network namespaces; bench/run_key.py run tiny: a Ray run
with the run key and one with --run_key=off (tests/conftest.py runs such
files on one pytest-xdist worker)."""

import math
import os
import subprocess
import sys

import pytest

from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import checkout_on_path
from acme_launch.testing.rundir import node_records
from tests.conftest import REPO_ROOT, read_json, user_env

pytestmark = pytest.mark.netns_cluster


def test_cluster_measures_local_mp_and_ray_side_by_side(tmp_path):
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  # Counts arrive per 2,000-step episode pair and the rate needs two rows a
  # second apart after the first count: 8,000 steps give three counts past
  # the first even when the actor runs alone.
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'bench', 'cluster.py'),
       '--seconds=5', '--warmup=0', '--steps=8000', '--actors=1',
       '--envs_per_actor=2', '--rounds=1', f'--out={tmp_path}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
      env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  results = read_json(os.path.join(tmp_path, 'cluster.json'))
  assert results['local_mp_env_steps_per_second'] > 0, results
  assert results['ray_env_steps_per_second'] > 0, results
  assert results['ray_over_local_mp'] > 0
  assert len(results['local_mp_rounds']) == len(results['ray_rounds']) == 1


def test_run_key_measures_a_ray_run_with_the_key_and_with_run_key_off(tmp_path):
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'bench', 'run_key.py'),
       '--configs=ppo_mujoco', '--seconds=5', '--warmup=0', '--steps=48000',
       '--actors=1', '--envs_per_actor=4', '--rounds=1', f'--out={tmp_path}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
      env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  figures = read_json(os.path.join(tmp_path, 'run_key.json'))['configs']
  ppo = figures['ppo_mujoco']
  # Both figures, over the same window: env steps/s, and the CPU seconds
  # per 1,000 env steps of every process on the three hosts.
  for name in ('steps_per_second', 'cpu_per_1000_steps'):
    figure = ppo[name]
    for value in (figure['key_median'], figure['off_median']):
      assert value is not None and 0 < value < math.inf, (name, figure)
    assert -1 < figure['median_key_over_off_minus_1'] < math.inf, figure
  # The connections accepted in the hosts' namespaces: some over the
  # program (the nodes' own, across hosts), no more in its window; the
  # bound they give, a fraction of the window's CPU.
  for arm in ('key', 'off'):
    (accepted,), (in_window,) = (ppo['accepted'][arm],
                                 ppo['accepted_in_window'][arm])
    assert 0 <= in_window <= accepted and accepted > 0, ppo['accepted']
  assert 0 < ppo['handshake_bound_max'] < 1, ppo['handshake_bound_max']
  # Measured while learning: 48,000 steps leave counter rows after the
  # learner's first step (2,048 steps a batch; it came at 12,000 actor
  # steps on this 2-core host idle, past 20,000 in a CI run under load,
  # where 24,000 steps left no two rows a second apart).
  # The arms differ by the proof alone: the actor of the key's run (on
  # host b) was given the key, the other's was not, and was warned of.
  runs = os.path.join(tmp_path, 'run_key')
  with_key = node_records(os.path.join(runs, 'ppo_mujoco_key_0'))['actor/0']
  without = node_records(os.path.join(runs, 'ppo_mujoco_off_0'))['actor/0']
  assert 'ACME_LAUNCH_RUN_KEY_FILE' in with_key['env']
  assert 'ACME_LAUNCH_RUN_KEY_FILE' not in without['env']
