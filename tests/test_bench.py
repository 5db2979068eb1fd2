"""Every bench/ script, run tiny: none can break unnoticed.

Each runs as a user runs it (its own process, real programs) with small
budgets; the assertions read the JSON each script writes next to its table.
"""

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT, read_json


def _bench(script: str, *args: str, timeout: float = 300):
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'bench', script), *args],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
      check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  return result


def test_throughput_measures_stock_acme_and_acme_launch(tmp_path):
  _bench('throughput.py', '--seconds=5', '--warmup=0', '--steps=6000',
         '--ceiling_seconds=1', '--cells=1x2', '--backends=envpool',
         f'--out={tmp_path}')
  results = read_json(os.path.join(tmp_path, 'throughput.json'))
  assert results['ceilings']['gym'] > 0 and results['ceilings']['envpool'] > 0
  assert [(r['backend'], r['actors'], r['envs_per_actor'])
          for r in results['acme_launch']] == [('envpool', 1, 2)]
  rates = ([r['env_steps_per_second'] for r in results['stock_acme']] +
           [r['env_steps_per_second'] for r in results['acme_launch']])
  assert len(rates) == 2 and all(r and r > 0 for r in rates), results


def test_learning_runs_each_seed_to_its_budget(tmp_path):
  _bench('learning.py', '--config=smoke', '--steps=2000', '--seeds=0',
         f'--out={tmp_path}')
  runs = read_json(os.path.join(tmp_path, 'learning.json'))['runs']
  assert [r['seed'] for r in runs] == [0]
  assert runs[0]['exit_reason'] == 'budget_reached'
  assert runs[0]['actor_steps'] >= 2000
  assert runs[0]['last_eval_return'] is not None
  assert os.path.isfile(runs[0]['curve'])


def test_startup_reports_first_steps_and_memory(tmp_path):
  _bench('startup.py', '--config=smoke', f'--out={tmp_path}')
  results = read_json(os.path.join(tmp_path, 'startup.json'))
  assert 0 < results['first_actor_step_seconds'] < 300
  assert 0 < results['first_learner_step_seconds'] < 300
  assert {'learner/0', 'actor/0'} <= set(results['resident_mib'])
