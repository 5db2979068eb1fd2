"""The decision (prepare.py): one frozen value, made without touching
anything; act.py is what takes the run directory."""

import dataclasses
import os

import psutil
import pytest

from acme_launch import prepare
from acme_launch.config import options as options_lib


@pytest.fixture(scope='module')
def decided():
  return prepare.check_arguments([
      'launch.py', '--config=smoke', '--max_node_restarts=5',
      '--node_log_max_mb=1', '--disk_guard_mb=2', '--max_wall_time=60',
      '--progress_every=3', '--show_output', '--node_start=exec'])


def test_the_decision_is_frozen_all_the_way(decided):
  with pytest.raises(dataclasses.FrozenInstanceError):
    decided.run_dir = '/elsewhere'
  with pytest.raises(dataclasses.FrozenInstanceError):
    decided.supervision.max_node_restarts = 0
  assert isinstance(decided.notes, tuple)
  assert isinstance(decided.argv, tuple) and isinstance(decided.python_path, tuple)
  assert decided.dry_run


def test_supervision_settings_are_part_of_the_decision(decided):
  assert decided.supervision == prepare.Supervision(
      show_output=True, max_wall_time=60.0, progress_every=3.0,
      max_node_restarts=5, auto_resume=0, node_start='exec',
      node_log_max_bytes=2**20, disk_guard_bytes=2 * 2**20,
      allow_public_cluster_address=False)


def test_a_run_is_decided_without_touching_anything(tmp_path):
  workdir = tmp_path / 'runs'
  options = options_lib.parse_again([
      'launch.py', '--config=smoke', f'--workdir={workdir}', '--run_name=r'])
  children = psutil.Process().children(recursive=True)
  early = prepare.decide_early(options)
  assert early.starts_fork_server       # A run under local_mp, fork: act.py's.
  launch = prepare.decide(early)
  assert not launch.dry_run and launch.slurm is None
  assert launch.run_dir == str(workdir / 'r')
  assert launch.plan is early.plan     # Planned once.
  assert not os.path.exists(workdir)
  assert psutil.Process().children(recursive=True) == children
