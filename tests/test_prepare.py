"""The decision (prepare.py): one frozen value, made without touching
anything; act.py is what takes the run directory."""

import dataclasses
import os

import psutil
import pytest

from acme_launch import errors
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


def _error(*argv) -> str:
  with pytest.raises(errors.LaunchError) as raised:
    prepare.check_arguments(['launch.py', *argv])
  message = str(raised.value)
  assert '\n' not in message
  return message


def test_a_learner_on_two_cpu_devices_is_planned_with_the_xla_flag():
  launch = prepare.check_arguments([
      'launch.py', '--config=impala_minatar',
      '--config.resources.learner.num_devices=2'])
  learner = launch.plan.placement('learner/0')
  assert learner.devices == 2 and learner.gpus == ()
  assert learner.env['XLA_FLAGS'] == '--xla_force_host_platform_device_count=2'


def test_a_device_count_the_agent_cannot_use_is_refused_naming_it():
  assert _error('--config=smoke', '--config.resources.learner.num_devices=2'
                ) == ("config.resources.learner.num_devices=2: agent ppo's "
                      "learner runs on 1 device (its adapter's "
                      'learner_devices; the shipped impala and r2d2 take any '
                      'number)')


def test_a_batch_that_does_not_split_over_the_devices_is_refused():
  assert 'config.r2d2.batch_size=32 does not split over the learner\'s 3' in (
      _error('--config=r2d2_minatar',
             '--config.resources.learner.num_devices=3'))


def test_several_learner_devices_need_a_process_of_the_learners_own():
  assert 'needs the learner in a process of its own' in _error(
      '--config=impala_minatar', '--launch_type=local_mt',
      '--config.resources.learner.num_devices=2')


def test_an_injected_inventory_gives_the_learner_its_gpus_of_one_model():
  inventories = os.path.join(os.path.dirname(__file__), 'inventories')
  launch = prepare.check_arguments([
      'launch.py', '--config=impala_minatar',
      f'--gpu_inventory={inventories}/a100x2_t4.json',
      '--config.resources.learner.num_devices=2'])
  learner = launch.plan.placement('learner/0')
  assert learner.gpus == (0, 2) and learner.devices == 2  # The two A100s.
  assert 'XLA_FLAGS' not in learner.env
  assert 'the learner needs 3 GPUs of one model' in _error(
      '--config=impala_minatar', f'--gpu_inventory={inventories}/a100x2_t4.json',
      '--config.resources.learner.num_devices=3')
