"""Hardening: the loopback shim's refusal, faults, hostile input.

Servers on loopback only, private run files and --allow_exposed_listeners
are checked on the shared local_mp and local_mt runs of test_launch_e2e.py;
another user's connections to a run's servers in run/test_loopback.py.
"""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time

from hypothesis import HealthCheck, event, given, settings, strategies as st
import pytest

from tests.conftest import (alive, node_pids, read_json,
                            run_launcher, start_launcher, wait_for)


# A shim that cannot be there: its folder does not exist, so it cannot be built.
_NO_SHIM = {'ACME_LAUNCH_LOOPBACK_LIBRARY': '/nonexistent-acme-launch/shim.so'}


@pytest.mark.parametrize('launch_type', ['local_mp', 'local_mt'])
def test_without_a_working_shim_local_runs_are_refused_in_one_line(
    workdir, launch_type):
  result = run_launcher('--config=smoke', f'--launch_type={launch_type}',
                        f'--workdir={workdir}', env=_NO_SHIM)
  assert result.returncode == 2, result.stderr[-2000:]
  assert 'Traceback' not in result.stderr
  errors = [l for l in result.stderr.splitlines() if 'acme-launch: error:' in l]
  assert len(errors) == 1, result.stderr
  assert 'loopback shim' in errors[0] and '--allow_exposed_listeners' in errors[0]
  assert os.listdir(workdir) == []


# Hostile input ---------------------------------------------------------------

_GROUPS = ('replay', 'counter', 'learner', 'actor', 'evaluator')
_HOSTILE_WORDS = (
    '', ' ', '-1', '1.5', '1e-300', '1e3', '1e309', 'nan', 'inf', '-inf',
    '2**31', '99999999999999999999999', 'true', 'None', 'auto', '0,,1',
    'limit:', 'limit:-1', '=', ',', ';', ':', 'A=1,B', 'XLA_FLAGS=--x',
    'gym:HalfCheetah-v4', 'no_such_module:X-v0', 'ü', "'", '"', '\\',
    '$HOME', '--', '\n')


def _hostile():
  return st.one_of(
      st.sampled_from(_HOSTILE_WORDS),
      st.integers(min_value=-2**40, max_value=2**70).map(str),
      st.floats(allow_nan=True, allow_infinity=True).map(repr),
      st.text(alphabet='ab01-_,;:=/. ', max_size=12))


def _ints(low, high):
  return st.integers(low, high).map(str)


def _floats(low, high):
  return st.floats(low, high).map(repr)


def _words(*words):
  return st.sampled_from(words)


# A plausible value per field, often wrong; _hostile() for any field as well.
_GROUP_FIELDS = {
    'gpus': _words('auto', 'none', '0', '1', '2', '0,1', '0,2', '7', '1,1', ''),
    'jax_preallocate': _words('true', 'false'),
    'jax_mem_fraction': _floats(-0.5, 1.5),
    'jax_allocator': _words('default', 'platform', 'bfc', 'cuda_async', 'x'),
    'tf_gpu': _words('none', 'growth', 'limit:512', '2048', 'limit:0', 'x'),
    'intra_op_threads': _ints(-1, 64),
    'inter_op_threads': _ints(-1, 64),
    'omp_threads': _ints(-1, 64),
    'extra_env': _words('', 'A=1', 'A=1,B=2', 'CUDA_VISIBLE_DEVICES=0',
                        'JAX_PLATFORMS=cuda', 'TF_CPP_MIN_LOG_LEVEL=0', 'X'),
}
_FIELDS = {
    'max_actor_steps': _ints(-5, 10**9),
    'num_actors': _ints(-1, 12),
    'envs_per_actor': _ints(-1, 64),
    'envpool_async_envs': _ints(-1, 128),
    'stagger_episode_starts': _words('true', 'false'),
    'num_evaluators': _ints(-1, 3),
    'eval_every_steps': _ints(-1, 10**6),
    'eval_episodes': _ints(-1, 10),
    'seed': _ints(-3, 2**40),
    'env_max_episode_steps': _ints(-1, 1000),
    'log_every_seconds': _floats(-1, 100),
    'env_name': _words('HalfCheetah-v4', 'Hopper-v4', 'Walker2d-v4',
                       'Pendulum-v1', 'NoSuchTask-v4'),
    'checkpoint.interval_minutes': _floats(-1, 100),
    'checkpoint.max_to_keep': _ints(-1, 5),
    'checkpoint.replay': _words('true', 'false'),
    'resources.cuda_context_overhead_mb': _ints(-10, 100000),
    'no_such_field': _words('1'),
    'resources.no_such_group.gpus': _words('0'),
    **{f'resources.{g}.{f}': values for g in _GROUPS
       for f, values in _GROUP_FIELDS.items()},
}
_NODE_NAMES = ('replay/0', 'counter/0', 'learner/0', 'actor/0', 'actor/1',
               'actor/9', 'evaluator/0', 'evaluator/1', 'limiter/0', 'nosuch/0',
               'actor', 'actor/-1')
_GPU_NAMES = ('NVIDIA A100-SXM4-80GB', 'Tesla T4', 'NVIDIA H100 80GB HBM3', '')


def _value(values):
  return st.one_of(values, values, values, _hostile())  # 3:1 plausible.


def _override():
  return st.sampled_from(sorted(_FIELDS)).flatmap(
      lambda field: st.tuples(st.just(field), _value(_FIELDS[field])))


def _node_overrides():
  entry = st.tuples(
      st.sampled_from(_NODE_NAMES),
      st.sampled_from(sorted(_GROUP_FIELDS) + ['nosuch']).flatmap(
          lambda field: st.tuples(st.just(field), _value(
              _GROUP_FIELDS.get(field, _words('1'))))))
  return st.one_of(st.just(''), st.lists(entry, min_size=1, max_size=3).map(
      lambda entries: ';'.join(f'{n}:{f}={v}' for n, (f, v) in entries)))


def _inventories():
  gpu = st.fixed_dictionaries({
      'index': st.one_of(st.integers(0, 7), st.integers(0, 7),
                         st.integers(-2, 2**40),
                         st.sampled_from(['0', 1.5, None])),
      'name': st.sampled_from(_GPU_NAMES),
      'memory_mb': st.one_of(st.sampled_from([81920, 15360, 12288, 1]),
                             st.integers(-10, 2**40))})
  files = st.sampled_from(['tests/inventories/a100x2_t4.json',
                           'tests/inventories/h100x8.json',
                           'tests/inventories/rtx3080_3080ti.json'])
  return st.one_of(
      st.just(None),  # Ask the driver (none here).
      files, files,
      st.just('/nonexistent/inventory.json'),
      st.lists(gpu, max_size=4).map(json.dumps),
      st.sampled_from(['', '{}', '[1]', 'not json', '[{"index": 0}]']),
      st.binary(max_size=16))


_ARGUMENTS = st.tuples(
    st.lists(_override(), max_size=5),
    _node_overrides(),
    _inventories(),
    st.sampled_from(['local_mp'] * 4 + ['local_mt', 'test_mt']),
    st.sampled_from(['smoke', 'ppo_mujoco', 'sac_mujoco', 'td3_mujoco',
                     'd4pg_mujoco', 'dqn_cartpole']))


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(arguments=_ARGUMENTS)
def test_any_overrides_and_resource_specs_give_exit_0_or_one_line_exit_2(
    cli_module, tmp_path_factory, arguments):
  """What decides the exit code before launch, in process: never a traceback.

  `prepare.check_arguments` is the CLI's own parsing, validation and planning
  (decide_early and decide, as for --dry_run); LaunchError is exit 2, a return exit 0,
  anything else would be a traceback.
  """
  from acme_launch import errors
  overrides, node_overrides, inventory, launch_type, config = arguments
  argv = ['launch.py', f'--config={config}', f'--launch_type={launch_type}']
  argv += [f'--config.{field}={value}' for field, value in overrides]
  if node_overrides:
    argv.append(f'--config.resources.node_overrides={node_overrides}')
  if inventory is not None:
    path = inventory
    if isinstance(inventory, bytes) or not inventory.startswith(
        ('tests/', '/nonexistent')):
      fd, path = tempfile.mkstemp(dir=tmp_path_factory.getbasetemp(),
                                  suffix='.json')
      with os.fdopen(fd, 'wb') as f:
        f.write(inventory if isinstance(inventory, bytes) else inventory.encode())
    argv.append(f'--gpu_inventory={path}')
  try:
    launch = cli_module.check_arguments(argv)
  except errors.LaunchError as e:
    message = str(e)
    assert message and '\n' not in message and 'Traceback' not in message, argv
    event('exit 2')
    return
  event('exit 0')
  assert launch.plan.placements, argv
  assert launch.built.program.get_all_nodes(), argv


def test_help_exits_0():
  result = run_launcher('--help')
  assert result.returncode == 0
  assert '--config' in result.stdout


def test_a_huge_actor_count_is_refused_at_once(workdir):
  started = time.time()
  result = run_launcher('--config=smoke', '--config.num_actors=1000000000',
                        f'--workdir={workdir}')
  assert result.returncode == 2
  assert 'config.num_actors must be at most' in result.stderr
  assert time.time() - started < 60
  assert os.listdir(workdir) == []


# Faults during a run -----------------------------------------------------------


def _checkpoint_run(workdir: str, run_name: str) -> subprocess.Popen:
  # The disk guard (which stops a run before the disk fills) is off: these
  # tests are about what a failed checkpoint write does.
  return start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                        '--config.checkpoint.interval_minutes=0.02',
                        '--disk_guard_mb=0',
                        f'--workdir={workdir}', f'--run_name={run_name}')


def _latest_checkpoint(directory: str) -> str:
  with open(os.path.join(directory, 'checkpoint')) as f:
    first = f.readline()  # model_checkpoint_path: "ckpt-N"
  return os.path.basename(first.split('"')[1])


def _verify_for_resume(run_dir: str):
  from acme_launch.run import resume as resume_lib
  return resume_lib.verify_for_resume(run_dir)


@contextlib.contextmanager
def _unwritable(path: str):
  """Makes `path` refuse new files, to root too; yields how."""
  if os.geteuid() != 0:
    os.chmod(path, 0o500)
    try:
      yield 'chmod 0500'
    finally:
      os.chmod(path, 0o700)
    return
  if shutil.which('chattr') and subprocess.run(
      ['chattr', '+i', path], capture_output=True, check=False).returncode == 0:
    try:
      yield 'chattr +i'
    finally:
      subprocess.run(['chattr', '-i', path], check=True)
    return
  if subprocess.run(['mount', '--bind', path, path], capture_output=True,
                    check=False).returncode == 0:
    try:
      subprocess.run(['mount', '-o', 'remount,ro,bind', path], check=True)
      yield 'read-only bind mount'
    finally:
      subprocess.run(['umount', path], check=True)
    return
  pytest.skip('cannot make a folder unwritable for root here '
              '(no chattr +i, no bind mounts)')


def test_unwritable_checkpoint_folder_stops_the_run_and_keeps_the_last_checkpoint(
    workdir):
  run_dir = os.path.join(workdir, 'frozen')
  learner_dir = os.path.join(run_dir, 'checkpoints', 'learner')
  launcher = _checkpoint_run(workdir, 'frozen')
  try:
    wait_for(lambda: os.path.isfile(os.path.join(learner_dir, 'checkpoint')),
             240, 'a learner checkpoint')
    pids = node_pids(run_dir)
    with _unwritable(learner_dir):
      last_good = _latest_checkpoint(learner_dir)
      _, stderr = launcher.communicate(timeout=180)
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()
  assert launcher.returncode == 1, stderr[-3000:]
  assert 'node learner/0 failed' in stderr
  assert f'cannot save a checkpoint in {learner_dir}' in stderr
  assert f'the last good checkpoint is kept: {os.path.join(learner_dir, last_good)}' in stderr
  assert read_json(os.path.join(run_dir, 'summary.json'))['failed_node'] == 'learner/0'
  wait_for(lambda: not alive(pids.values()), 30, 'node processes to end')
  resume = _verify_for_resume(run_dir)
  assert resume.checkpoints['learner'] == os.path.join(learner_dir, last_good)
  assert resume.warnings == []


def test_full_disk_stops_the_run_and_keeps_the_last_checkpoint(workdir):
  if os.geteuid() != 0:
    pytest.skip('mounting a small tmpfs needs root')
  run_dir = os.path.join(workdir, 'full')
  checkpoints = os.path.join(run_dir, 'checkpoints')
  learner_dir = os.path.join(checkpoints, 'learner')
  os.makedirs(checkpoints, mode=0o700)
  if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=16m,mode=0700',
                     'tmpfs', checkpoints], capture_output=True,
                    check=False).returncode:
    pytest.skip('cannot mount a tmpfs here')
  try:
    launcher = _checkpoint_run(workdir, 'full')
    try:
      wait_for(lambda: os.path.isfile(os.path.join(learner_dir, 'checkpoint')),
               240, 'a learner checkpoint')
      filler = os.path.join(checkpoints, 'filler')
      with open(filler, 'wb') as f:
        with contextlib.suppress(OSError):
          while True:
            f.write(b'\0' * (1 << 20))
            f.flush()
      _, stderr = launcher.communicate(timeout=180)
    finally:
      if launcher.poll() is None:
        launcher.kill()
        launcher.communicate()
    assert launcher.returncode == 1, stderr[-3000:]
    failed = read_json(os.path.join(run_dir, 'summary.json'))['failed_node']
    assert failed in ('replay/0', 'counter/0', 'learner/0')
    assert f'node {failed} failed' in stderr
    assert 'No space left on device; the last good checkpoint is kept' in stderr
    os.unlink(filler)
    resume = _verify_for_resume(run_dir)  # Reads every file it would restore.
    assert set(resume.checkpoints) >= {'learner', 'counter'}
    assert resume.warnings == []
  finally:
    subprocess.run(['umount', checkpoints], check=True)


# An environment error in an actor (that actor's failure, named): with the
# restart limit's test, in run/test_restarts.py.
