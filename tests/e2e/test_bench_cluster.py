"""bench/cluster.py run tiny: local_mp and Ray side by side, the Ray rounds
on a cluster of network namespaces (tests/conftest.py runs such files on
one pytest-xdist worker)."""

import os
import subprocess
import sys

import pytest

from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import checkout_on_path
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
