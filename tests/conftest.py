"""Fixtures and checks of the test suite; the helpers it shares with bench/
live in acme_launch/testing/ and are re-imported here.

The tests mirror the package: tests/<subpackage>/test_<module>.py holds the
in-process tests of acme_launch/<subpackage>/, and tests/e2e/ those that
start the launcher or launch programs (and a few that build every shipped
program in process, minutes in all). tests/e2e/ mirrors the package the same way: the e2e tests of what
tests/<subpackage>/test_x.py tests in process live in
tests/e2e/<subpackage>/test_x.py, under the same name; the tests of the
launcher as a whole (the CLI, checkpointing, tracking, bundles, an agent
family end to end) are files at tests/e2e/'s top, as cli.py and driver.py
are at the package's. The folder alone makes a test e2e: the hook below
marks everything under tests/e2e/ with the `e2e` marker (pytest.ini) and
nothing else carries it, so `-m "not e2e"` runs the fast in-process tests.
"""

import fcntl
import os
import subprocess
import tempfile

import pytest

# Shared with bench/ (acme_launch/testing/); re-imported here, where the
# tests have always found them.
from acme_launch.testing.launcher import (REPO_ROOT, alive, killed_on_exit,
                                          run_launcher, start_launcher,
                                          user_env, wait_for)
from acme_launch.testing.rundir import (actor_steps, node_pids, node_records,
                                        read_json)

__all__ = ['REPO_ROOT', 'actor_steps', 'alive', 'killed_on_exit', 'node_pids',
           'node_records', 'reached_budget', 'read_json', 'resumed_to_budget',
           'run_launcher', 'start_launcher', 'user_env', 'wait_for', 'workdir']

_E2E_DIR = os.path.join(REPO_ROOT, 'tests', 'e2e') + os.sep


# The files of the tests marked `netns_cluster` (each builds a Ray cluster
# of network namespaces, or a Slurm one): all of a file's tests carry it.
# Under pytest-xdist they form one unit of work, run by one worker one after
# another, while the other worker takes the other files; run apart, two
# such tests at once would overload a small machine, and one worker would
# wait on the other (the lock below).
NETNS_CLUSTER_FILES = frozenset((
    'tests/e2e/run/ray/test_ray_cluster.py',
    'tests/e2e/run/ray/test_ray_faults.py',
    'tests/e2e/run/ray/test_ray_open_cluster.py',
    'tests/e2e/sweep/test_ray_sweep.py',
    'tests/e2e/test_bench_cluster.py',
    'tests/e2e/test_chaos_bench.py',
    'tests/e2e/test_slurm.py',
    'tests/run/ray/test_ray_cluster.py',
))


def pytest_collection_modifyitems(items):
  """Everything in tests/e2e/, and nothing else, is an end-to-end test; the
  `netns_cluster` tests are exactly those of NETNS_CLUSTER_FILES."""
  for item in items:
    if str(item.fspath).startswith(_E2E_DIR):
      item.add_marker(pytest.mark.e2e)
    path = os.path.relpath(str(item.fspath), REPO_ROOT)
    marked = item.get_closest_marker('netns_cluster') is not None
    if marked != (path in NETNS_CLUSTER_FILES):
      raise pytest.UsageError(
          f'{item.nodeid}: in tests/conftest.py\'s NETNS_CLUSTER_FILES exactly '
          'when marked netns_cluster (a whole file is)')


@pytest.hookimpl(optionalhook=True)  # A hook of pytest-xdist's, if installed.
def pytest_xdist_make_scheduler(config, log):
  """`--dist loadfile` (scripts/test.sh), with NETNS_CLUSTER_FILES as one
  file."""
  if config.getvalue('dist') != 'loadfile':
    return None
  from xdist.scheduler import LoadFileScheduling

  class NetnsClusterFilesTogether(LoadFileScheduling):

    def _split_scope(self, nodeid: str) -> str:
      path = nodeid.split('::', 1)[0]
      return 'netns_cluster' if path in NETNS_CLUSTER_FILES else path

  return NetnsClusterFilesTogether(config, log)


@pytest.fixture(autouse=True)
def _one_namespace_cluster_test_at_a_time(request):
  """Tests marked `netns_cluster` run one at a time: two Ray programs of
  several hosts at once overload a small machine. Under scripts/test.sh
  they share a worker (the scheduler above); a lock file held for the test
  keeps that true for any other way of running them (the module's cluster,
  idle, may already be up)."""
  if request.node.get_closest_marker('netns_cluster') is None:
    yield
    return
  path = os.path.join(tempfile.gettempdir(), 'acme-launch-netns-tests.lock')
  with open(path, 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    yield


@pytest.fixture
def workdir(tmp_path):
  path = tmp_path / 'runs'
  path.mkdir()
  return str(path)


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
