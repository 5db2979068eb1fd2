"""bench/cluster.py run tiny: local_mp and Ray side by side, the Ray rounds
on a cluster of network namespaces; bench/run_key.py run tiny: a Ray run
with the run key and one with --run_key=off (tests/conftest.py runs such
files on one pytest-xdist worker)."""

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
       '--configs=ppo_mujoco', '--seconds=5', '--warmup=0', '--steps=24000',
       '--actors=1', '--envs_per_actor=4', '--rounds=1', f'--out={tmp_path}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
      env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  figures = read_json(os.path.join(tmp_path, 'run_key.json'))['configs']
  ppo = figures['ppo_mujoco']
  assert ppo['key_median'] > 0 and ppo['off_median'] > 0, ppo
  assert ppo['median_key_over_off_minus_1'] > -1
  # Measured while learning: 24,000 steps leave counter rows after the
  # learner's first step (2,048 steps a batch; on a loaded 2-core host it
  # came at 6,000 to 12,000 actor steps).
  # The arms differ by the proof alone: the actor of the key's run (on
  # host b) was given the key, the other's was not, and was warned of.
  runs = os.path.join(tmp_path, 'run_key')
  with_key = node_records(os.path.join(runs, 'ppo_mujoco_key_0'))['actor/0']
  without = node_records(os.path.join(runs, 'ppo_mujoco_off_0'))['actor/0']
  assert 'ACME_LAUNCH_RUN_KEY_FILE' in with_key['env']
  assert 'ACME_LAUNCH_RUN_KEY_FILE' not in without['env']
