"""bench/chaos.py, run small: faults on a namespace cluster, then its report.

Half a minute of chaos with one fault of each kind (their seeded times all
within it, the first process kill ten seconds in) on the three-host cluster
the bench makes itself, and a budget small enough that the run ends soon
after; the assertions read its chaos.json. Bad input is refused before
anything starts.
"""

import os
import subprocess
import sys

import pytest

from acme_launch.testing import cluster as netns_cluster
from acme_launch.testing.launcher import checkout_on_path
from tests.conftest import REPO_ROOT, read_json, user_env

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster

CHAOS = os.path.join(REPO_ROOT, 'bench', 'chaos.py')


def _chaos(*args, timeout=900):
  return subprocess.run([sys.executable, CHAOS, *args], cwd=REPO_ROOT,
                        capture_output=True, text=True, timeout=timeout,
                        env=checkout_on_path(user_env()), check=False)


@pytest.mark.parametrize('args, what', [
    (['--hosts=b,c,z'], 'no such worker: z'),
    (['--hosts=a'], 'no such worker: a'),
    (['--minutes=0'], '--minutes must be a positive number'),
    (['--minutes=-2'], '--minutes must be a positive number'),
    (['--minutes=nan'], '--minutes must be a positive number'),
])
def test_chaos_bad_input_is_one_line_exit_2_before_anything_starts(
    tmp_path, args, what):
  result = _chaos(*args, f'--out={tmp_path / "out"}', timeout=60)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and what in lines[0], result.stderr
  assert not os.path.exists(tmp_path / 'out')


def test_chaos_smoke_run_reaches_its_budget_counts_every_step_and_leaves_nothing(
    tmp_path):
  reason = netns_cluster.why_not_available()
  if reason:
    pytest.skip(f'no network namespaces here: {reason}')
  # Seed 19 at half a minute: process kills at 9.9 and 14.6 s, the link
  # cut at 16.7 s, the host loss at 19.3 s (schedule() in bench/chaos.py).
  result = _chaos('--minutes=0.5', '--seed=19', '--host_losses=1',
                  '--process_kills=2', '--link_cuts=1', '--steps=6000',
                  '--cut_seconds=3', '--down_seconds=3', f'--out={tmp_path}')
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  r = read_json(os.path.join(tmp_path, 'chaos.json'))
  kinds = [f['kind'] for f in r['faults'] if 'skipped' not in f]
  assert sorted(kinds) == ['host_loss', 'link_cut', 'process_kill',
                           'process_kill'], r['faults']
  assert r['budget_reached'] and r['summary']['exit_reason'] == 'budget_reached'
  events = r['launcher_events']
  # Each killed actor came back on its host; the host loss moved one.
  assert events['restarted_on_same_host'] >= 2, events
  assert events['moved_to_another_host'] >= 1, events
  assert r['counting']['consistent'], r['counting']
  assert r['left_in_cluster'] == [] and r['left_after_teardown'] == []
  assert 'budget reached: True' in result.stdout
