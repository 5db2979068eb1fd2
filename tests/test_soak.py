"""bench/soak.py, run tiny: it samples every node and writes its figures."""

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT, read_json, user_env


def test_soak_samples_every_node_and_reports_growth(tmp_path):
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'bench', 'soak.py'),
       '--config=smoke', '--minutes=1', '--every=1', '--settle_minutes=0.1',
       f'--out={tmp_path}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
      env=user_env(), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
  soak = read_json(os.path.join(tmp_path, 'soak.json'))
  assert {'learner/0', 'actor/0', 'replay/0', 'counter/0'} <= set(soak['nodes'])
  for node in soak['nodes'].values():
    assert node['rss_mib_end'] > 50 and node['fds_end'] > 0
  assert soak['actor_steps_end'] > soak['actor_steps_settled'] >= 0
  assert os.path.getsize(os.path.join(tmp_path, 'soak_rss.png')) > 0
  assert 'largest growth' in result.stdout
