"""The decision (prepare.py): one frozen value, made without touching
anything; act.py is what takes the run directory."""

import dataclasses
import os
import re

from hypothesis import HealthCheck, given, settings, strategies as st
import psutil
import pytest

from acme_launch import errors
from acme_launch import prepare
from acme_launch import safe_dirs
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


def test_default_run_names_have_a_random_part_and_are_safe():
  """Two runs started in the same second get different names, which nobody
  can guess ahead (act.py makes the folder exclusively)."""
  names = {prepare.default_run_name('smoke') for _ in range(20)}
  assert len(names) == 20
  for name in names:
    assert re.fullmatch(r'smoke_\d{8}-\d{6}-[0-9a-f]{6}', name), name
    safe_dirs.check_name(name)
  assert re.fullmatch(r'my_config_1__sweep_\d{8}-\d{6}-[0-9a-f]{6}',
                      prepare.default_run_name('my config[1]', 'sweep'))
  assert prepare.default_run_name('../..').startswith('_..')


def _make(path, kind):
  """A folder of `kind` at `path` (or nothing for 'missing')."""
  if kind == 'file':
    path.write_text('x')
  elif kind == 'link':
    target = path.parent / f'{path.name}-target'
    target.mkdir(mode=0o700)
    os.symlink(target, path)
  elif kind != 'missing':
    path.mkdir()
    if kind == 'group' and os.geteuid() == 0:
      os.chown(path, -1, 65534)  # nogroup: a group others are in.
    os.chmod(path, {'private': 0o700, 'open': 0o777, 'group': 0o770,
                    'sticky': 0o1777}[kind])


# Without root the 'group' folder keeps the user's group: the user's alone
# when it is a private group (safe_dirs.is_private_group).
_GROUP_IS_MINE = (os.geteuid() != 0 and
                  safe_dirs.is_private_group(os.getegid(), os.geteuid()))


def _snapshot(path):
  return sorted((folder, tuple(sorted(names)), tuple(sorted(files)))
                for folder, names, files in os.walk(path))


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(name=st.one_of(st.text(max_size=24),
                      st.text(alphabet='ab.[]*?/=,_-', max_size=8),
                      st.sampled_from(['..', '.', 'a/b', 'a[1]', '/', 'run',
                                       'seed=0,lr=0.1', '../x', 'x/..'])),
       workdir_kind=st.sampled_from(['missing', 'private', 'open', 'group',
                                     'sticky', 'link', 'file']),
       run_kind=st.sampled_from(['missing', 'private', 'open', 'sticky',
                                 'link', 'file']))
def test_any_run_name_and_folders_give_a_checked_run_directory_or_one_line(
    tmp_path_factory, name, workdir_kind, run_kind):
  """The decision over any --run_name and any state of the workdir and run
  directory: a run directory that is one safe folder in a workdir nobody
  else can change, or one line (exit 2); nothing there changed either way."""
  base = tmp_path_factory.mktemp('names')
  workdir = base / 'workdir'
  _make(workdir, workdir_kind)
  safe = safe_dirs.is_safe_name(name)
  if safe and workdir_kind in ('private', 'open', 'group', 'sticky'):
    _make(workdir / name, run_kind)
  else:
    run_kind = 'missing'
  before = _snapshot(base)
  argv = ['launch.py', '--config=smoke', f'--workdir={workdir}',
          f'--run_name={name}']
  try:
    early = prepare.decide_early(
        dataclasses.replace(options_lib.parse_again(argv), dry_run=True))
  except errors.LaunchError as e:
    assert str(e) and '\n' not in str(e), argv
    refused = True
  else:
    refused = False
    assert os.path.dirname(early.run_dir) == str(workdir)
    assert safe_dirs.is_safe_name(os.path.basename(early.run_dir))
    assert early.new_run_dir == (name == '')
  fine = ((safe or name == '') and
          (workdir_kind in ('missing', 'private', 'sticky') or
           (workdir_kind == 'group' and _GROUP_IS_MINE)) and
          run_kind in ('missing', 'private'))
  assert refused != fine, (argv, workdir_kind, run_kind)
  assert _snapshot(base) == before


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
