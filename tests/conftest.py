"""Shared helpers: run the real launcher as a user would, in a subprocess.

The tests mirror the package: tests/<subpackage>/ holds the tests of
acme_launch/<subpackage>/, and tests/e2e/ those that launch programs. Every
test under tests/e2e/, and every other one that starts the launcher or a
program, carries the `e2e` marker (pytest.ini): `-m "not e2e"` runs the
fast in-process ones.
"""

import contextlib
import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_E2E_DIR = os.path.join(REPO_ROOT, 'tests', 'e2e') + os.sep


def pytest_collection_modifyitems(items):
  """Everything in tests/e2e/ is an end-to-end test."""
  for item in items:
    if str(item.fspath).startswith(_E2E_DIR):
      item.add_marker(pytest.mark.e2e)


def user_env(extra=None) -> dict:
  """This process's environment as a user's shell would have it: importing
  jax here set TF_CPP_MIN_LOG_LEVEL=1, which a launcher would then keep."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  return {**env, **(extra or {})}


def run_launcher(*args: str, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
  """`python launch.py ARGS` from the repo root; output captured as text."""
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), *args],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
      env=user_env(env), check=False)


def read_json(path: str):
  with open(path) as f:
    return json.load(f)


@pytest.fixture
def workdir(tmp_path):
  path = tmp_path / 'runs'
  path.mkdir()
  return str(path)


def start_launcher(*args: str) -> subprocess.Popen:
  """`python launch.py ARGS` in the background, output captured as text."""
  return subprocess.Popen(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), *args],
      cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=user_env())


@contextlib.contextmanager
def killed_on_exit(launcher: subprocess.Popen):
  """Yields `launcher`; kills it on the way out if a test left it running."""
  try:
    yield launcher
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()


def wait_for(condition, timeout: float, what: str, interval: float = 0.5):
  """Polls `condition()` until it returns a true value; fails the test after `timeout`."""
  import time
  deadline = time.time() + timeout
  while time.time() < deadline:
    value = condition()
    if value:
      return value
    time.sleep(interval)
  pytest.fail(f'timed out after {timeout:.0f}s waiting for {what}')


def reached_budget(result: subprocess.CompletedProcess, run_dir: str,
                   budget: int, evaluated_during: bool = True) -> dict:
  """The summary of a run that exited 0 at its budget, with learner steps
  and, unless `evaluated_during` is False (actors fast enough to reach the
  budget before the evaluator's first game ends), at least one evaluation
  during the run (asserted)."""
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= budget
  assert summary['learner_steps'] > 0
  if evaluated_during:
    assert summary['evaluator_episodes'] >= 1
  return summary


def resumed_to_budget(result: subprocess.CompletedProcess, run_dir: str,
                      restored: int, budget: int, learner_steps: int) -> dict:
  """The summary of a --resume that exited 0 at its new budget, having
  restored at least `restored` actor steps and trained on past the first
  run's `learner_steps` (asserted)."""
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  assert 'resuming from' in result.stdout
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['restored_actor_steps'] >= restored
  assert summary['actor_steps'] >= budget
  assert summary['learner_steps'] > learner_steps  # Went on, not from 0.
  return summary


def actor_steps(run_dir: str) -> int:
  """The counter's actor steps as the steps limiter last wrote them."""
  try:
    return int(read_json(os.path.join(run_dir, 'progress.json'))['counts'].get('actor_steps', 0))
  except (FileNotFoundError, json.JSONDecodeError, KeyError):
    return 0


def node_records(run_dir: str) -> dict:
  """Node name -> what its process recorded in nodes/<node>.json."""
  nodes_dir = os.path.join(run_dir, 'nodes')
  records = {}
  for name in os.listdir(nodes_dir):
    if name.startswith('.') or not name.endswith('.json'):
      continue  # A record being written (write_json_atomic's temp file).
    record = read_json(os.path.join(nodes_dir, name))
    if 'pid' in record and 'node' in record:
      records[record['node']] = record
  return records


def node_pids(run_dir: str) -> dict:
  """Node name -> pid, as each node process recorded itself in nodes/."""
  return {node: record['pid'] for node, record in node_records(run_dir).items()}


def alive(pids) -> list:
  """The pids among `pids` that are still running (zombies count as gone)."""
  import psutil
  running = []
  for pid in pids:
    try:
      if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        running.append(pid)
    except psutil.NoSuchProcess:
      pass
  return running
