"""acme_launch/testing: what tests and bench/ read back from a run directory
while it is being written, and how bench tables print figures."""

import os
import subprocess
import sys

import pytest

from acme_launch import layout
from acme_launch.testing import launcher, report, rundir


def test_a_run_directory_not_written_yet_reads_as_nothing(tmp_path):
  run_dir = str(tmp_path / 'run')
  assert rundir.actor_steps(run_dir) == 0
  assert rundir.node_records(run_dir) == {} and rundir.node_pids(run_dir) == {}
  with pytest.raises(FileNotFoundError):
    rundir.read_json(layout.summary_path(run_dir))


def test_actor_steps_and_node_records_as_the_run_writes_them(tmp_path):
  run_dir = str(tmp_path)
  os.makedirs(layout.nodes_dir(run_dir))
  layout.write_json_atomic(layout.progress_path(run_dir), {'counts': {}})
  assert rundir.actor_steps(run_dir) == 0
  layout.write_json_atomic(layout.progress_path(run_dir),
                           {'counts': {'actor_steps': 1234.0}})
  assert rundir.actor_steps(run_dir) == 1234
  for node, pid in (('learner/0', 11), ('actor/0', 12)):
    layout.write_json_atomic(
        os.path.join(layout.nodes_dir(run_dir), node.replace('/', '_') + '.json'),
        {'node': node, 'pid': pid})
  # A record being written, one without a pid, and a broken one: skipped.
  with open(os.path.join(layout.nodes_dir(run_dir), '.tmp-x'), 'w') as f:
    f.write('{')
  layout.write_json_atomic(
      os.path.join(layout.nodes_dir(run_dir), 'replay_0.json'), {'node': 'replay/0'})
  with open(os.path.join(layout.nodes_dir(run_dir), 'counter_0.json'), 'w') as f:
    f.write('{"node": ')
  assert rundir.node_pids(run_dir) == {'learner/0': 11, 'actor/0': 12}


def test_wait_for_returns_the_value_or_times_out():
  values = iter([0, None, 'ready'])
  assert launcher.wait_for(lambda: next(values), 5, 'ready', interval=0) == 'ready'
  with pytest.raises(TimeoutError, match='waiting for nothing'):
    launcher.wait_for(lambda: False, 0.05, 'nothing', interval=0.01)


def test_killed_on_exit_and_alive():
  process = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  assert launcher.alive([process.pid]) == [process.pid]
  with launcher.killed_on_exit(process):
    pass
  assert process.poll() is not None and launcher.alive([process.pid]) == []


def test_the_checkout_goes_first_on_pythonpath():
  env = launcher.checkout_on_path({'PYTHONPATH': '/elsewhere'})
  assert env['PYTHONPATH'] == os.pathsep.join([launcher.REPO_ROOT, '/elsewhere'])
  assert launcher.checkout_on_path({})['PYTHONPATH'] == launcher.REPO_ROOT
  assert os.path.isfile(launcher.launch_command()[1])


def test_numbers_as_bench_tables_print_them():
  assert report.number(12345.6) == '12,346'
  assert report.number(None) == 'failed'
  assert report.number(1.26, '.1f', '-') == '1.3'
  assert report.number(None, missing='-') == '-'
