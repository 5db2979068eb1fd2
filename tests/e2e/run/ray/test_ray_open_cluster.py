"""A Ray cluster that answers without Ray's token authentication is refused
before anything starts (the launcher asks the cluster's GCS with a call
that carries no token), unless --allow_open_cluster says nobody else can
reach it. The token clusters of the other Ray tests pass the same check."""

import os
import subprocess
import sys

import pytest

from acme_launch.testing import cluster as netns_cluster
from tests.conftest import REPO_ROOT

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster


@pytest.fixture(scope='module')
def open_cluster():
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  hosts = netns_cluster.NetnsCluster(['a'], {'a': 6}, token_auth=False)
  try:
    hosts.up()
    yield hosts
  finally:
    hosts.down()


def _launch(cluster, tmp_path, *args):
  argv = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
          '--config=smoke', '--launch_type=ray',
          f'--ray_address={cluster.address}', f'--workdir={tmp_path}',
          '--run_name=run', *args]
  return subprocess.run(cluster.in_host('a', argv), cwd=REPO_ROOT,
                        env=cluster.env, capture_output=True, text=True,
                        timeout=180, check=False)


def test_an_open_cluster_is_one_line_exit_2_unless_allowed(open_cluster, tmp_path):
  assert open_cluster.env['RAY_AUTH_MODE'] == 'disabled'
  result = _launch(open_cluster, tmp_path)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert lines == [
      f'acme-launch: error: the Ray cluster at {open_cluster.address} answers '
      'without a token: anyone who reaches it can run code on its hosts; '
      'start its Ray with RAY_AUTH_MODE=token (docs/ray-clusters.md), or pass '
      '--allow_open_cluster if nobody else can reach it'], result.stderr
  assert not os.path.exists(tmp_path / 'run')
  assert not open_cluster.run_processes()
  # Allowed: the same cluster plans (a dry run, which starts nothing).
  result = _launch(open_cluster, tmp_path, '--allow_open_cluster', '--dry_run')
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'the cluster can hold the plan.' in result.stdout
  assert not os.path.exists(tmp_path / 'run')
