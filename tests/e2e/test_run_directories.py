"""Run, sweep and work directories nobody else can change, through the real
launcher (acme_launch/safe_dirs.py, run/rundir.py; the in-process tests are
tests/test_safe_dirs.py, tests/run/test_rundir.py, tests/config/test_saved.py).

Every refusal is one line and exit 2, before any process starts, and
leaves what was there as it was. Where another user matters, that user is
real: `setpriv` runs commands as nobody (uid 65534), which needs root.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from tests.conftest import run_launcher

NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
_AS_NOBODY = os.geteuid() == 0 and shutil.which('setpriv') is not None


def _refused(result, expected: str) -> str:
  """The one error line of a launcher that exited 2 and printed nothing else."""
  assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
  assert 'Traceback' not in result.stderr, result.stderr
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith('acme-launch: error: '), (
      result.stderr)
  assert expected in lines[0], lines[0]
  assert result.stdout == ''
  return lines[0]


def _tree(path):
  """Every entry under `path` with its kind, mode, owner and content."""
  found = {}
  for folder, names, files in os.walk(path):
    for name in names + files:
      entry = os.path.join(folder, name)
      st = os.lstat(entry)
      content = (os.readlink(entry) if os.path.islink(entry) else
                 open(entry, 'rb').read() if os.path.isfile(entry) else None)
      found[os.path.relpath(entry, path)] = (st.st_mode, st.st_uid, content)
  return found


@pytest.fixture
def shared():
  """A folder like /tmp (mode 1777) that nobody can reach: under /tmp, as
  pytest's own temp folders are private to root."""
  path = tempfile.mkdtemp(prefix='acme-launch-shared-', dir='/tmp')
  os.chmod(path, 0o1777)
  yield pathlib.Path(path)
  shutil.rmtree(path)


@pytest.fixture
def sentinel(tmp_path):
  path = tmp_path / 'sentinel'
  path.write_text('precious\n')
  return path


def test_a_premade_open_run_directory_whose_lock_links_to_a_sentinel_is_exit_2(
    workdir, sentinel):
  run_dir = os.path.join(workdir, 'shared')
  os.mkdir(run_dir)
  os.chmod(run_dir, 0o777)
  os.symlink(sentinel, os.path.join(run_dir, '.lock'))
  before = _tree(workdir)
  for where in ([f'--workdir={workdir}', '--run_name=shared'],
                [f'--resume={run_dir}']):
    result = run_launcher('--config=smoke', *where)
    _refused(result, f'run directory {run_dir} is writable by others (mode '
             '0777): refused')
  assert sentinel.read_text() == 'precious\n'
  assert _tree(workdir) == before


@pytest.mark.parametrize('name', ['..', 'a/b', 'a[1]'])
def test_run_names_that_are_not_one_plain_folder_are_exit_2(workdir, name):
  result = run_launcher('--config=smoke', f'--workdir={workdir}',
                        f'--run_name={name}')
  _refused(result, f'--run_name={name!r} is refused: a run name is one '
           'folder name of letters, digits and . _ , = + -')
  assert os.listdir(workdir) == []


def test_a_file_as_resume_or_workdir_and_a_config_json_no_object_are_exit_2(
    workdir, tmp_path):
  file = tmp_path / 'file'
  file.write_text('x')
  _refused(run_launcher(f'--resume={file}'),
           f'--resume={file}: run directory {file} is not a directory')
  _refused(run_launcher('--config=smoke', f'--workdir={file}'),
           f'workdir {file} is not a directory')
  run_dir = os.path.join(workdir, 'run')
  os.mkdir(run_dir)
  with open(os.path.join(run_dir, 'config.json'), 'w') as f:
    f.write('[1, 2]')
  _refused(run_launcher(f'--resume={run_dir}'),
           f'{run_dir}/config.json is not a saved run config')
  assert file.read_text() == 'x'
  assert os.listdir(run_dir) == ['config.json']


def test_resume_from_an_open_run_directory_imports_nothing_of_its_saved_code(
    workdir, tmp_path):
  """config.json names an agent module in a python_path folder; importing
  it would leave a marker. The folder is refused before it is read."""
  code = tmp_path / 'planted'
  code.mkdir()
  marker = tmp_path / 'imported'
  (code / 'planted_agent.py').write_text(
      f'open({str(marker)!r}, "w").write("ran")\n')
  run_dir = os.path.join(workdir, 'run')
  os.mkdir(run_dir)
  with open(os.path.join(run_dir, 'config.json'), 'w') as f:
    json.dump({'config_name': 'smoke', 'python_path': [str(code)],
               'config': {'agent': 'planted_agent'}}, f)
  # Group-writable for a group others are in (as root: nogroup; a user's own
  # private group would make the group bit the user's alone).
  mode = 0o775 if os.geteuid() == 0 else 0o757
  if os.geteuid() == 0:
    os.chown(run_dir, -1, 65534)
  os.chmod(run_dir, mode)
  result = run_launcher(f'--resume={run_dir}')
  _refused(result, f'run directory {run_dir} is writable by others (mode {mode:04o})')
  result = run_launcher('--config=smoke', f'--resume={run_dir}', '--dry_run')
  _refused(result, f'run directory {run_dir} is writable by others (mode {mode:04o})')
  assert not marker.exists()


def test_a_workdir_link_and_an_open_compilation_cache_are_exit_2(
    workdir, tmp_path):
  os.symlink(workdir, tmp_path / 'link')
  _refused(run_launcher('--config=smoke', f'--workdir={tmp_path}/link'),
           f'workdir {tmp_path}/link is a symbolic link')
  cache = tmp_path / 'cache'
  cache.mkdir()
  os.chmod(cache, 0o777)
  _refused(run_launcher('--config=smoke', f'--workdir={workdir}',
                        f'--compilation_cache={cache}'),
           f'compilation cache folder {cache} is writable by others')
  assert os.listdir(workdir) == [] and os.listdir(cache) == []


def test_sweep_directories_get_the_same_checks(workdir, tmp_path):
  _refused(run_launcher('--config=smoke', '--sweep=seed=0,1',
                        f'--workdir={workdir}', '--run_name=a[1]'),
           "--run_name='a[1]' is refused")
  # A sweep directory others could write to: its sweep.json would say which
  # config file every point's launcher loads.
  sweep_dir = os.path.join(workdir, 'sweep')
  os.mkdir(sweep_dir)
  marker = tmp_path / 'loaded'
  planted = tmp_path / 'planted_config.py'
  planted.write_text(f'open({str(marker)!r}, "w").write("ran")\n')
  with open(os.path.join(sweep_dir, 'sweep.json'), 'w') as f:
    json.dump({'points': [], 'base_argv': [f'--config={planted}']}, f)
  os.chmod(sweep_dir, 0o777)
  before = _tree(workdir)
  _refused(run_launcher(f'--resume={sweep_dir}'),
           f'sweep directory {sweep_dir} is writable by others')
  assert _tree(workdir) == before and not marker.exists()


@pytest.mark.skipif(not _AS_NOBODY, reason='needs root and setpriv')
def test_another_users_folder_in_a_shared_sticky_folder_is_exit_2(
    shared, tmp_path, sentinel):
  """In a folder like /tmp (mode 1777), nobody makes the run directory a
  run would use, and links its lock to a file of the user's."""
  victim = shared / 'victim'
  subprocess.run([*NOBODY, 'sh', '-c', f'mkdir -m 700 {victim} && '
                  f'ln -s {sentinel} {victim}/.lock && '
                  f'ln -s {tmp_path} {shared}/elsewhere'], check=True)
  _refused(run_launcher('--config=smoke', f'--workdir={shared}',
                        '--run_name=victim'),
           f'run directory {victim} belongs to nobody, not to you (root)')
  _refused(run_launcher('--config=smoke', f'--workdir={shared}',
                        '--run_name=elsewhere'),
           f'run directory {shared}/elsewhere is a symbolic link')
  assert sentinel.read_text() == 'precious\n'
  # The shared folder itself stays usable for the user's own runs.
  result = run_launcher('--config=smoke', f'--workdir={shared}', '--dry_run')
  assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize('launch_type', ['local_mp', 'local_mt'])
def test_a_temp_folder_others_can_write_is_exit_2_before_anything_starts(
    workdir, shared, launch_type):
  """The nodes' private temp folders are made in it (TF's AutoGraph writes
  code there that they import): one that anyone may change, without the
  sticky bit, is refused; /tmp-like (1777) is used."""
  open_folder = shared / 'open'
  open_folder.mkdir()
  os.chmod(open_folder, 0o777)
  _refused(run_launcher('--config=smoke', f'--launch_type={launch_type}',
                        f'--workdir={workdir}',
                        env={'TMPDIR': str(open_folder)}),
           f'temp folder {open_folder} is writable by others (mode 0777 and '
           'no sticky bit)')
  assert os.listdir(workdir) == [] and os.listdir(open_folder) == []
  result = run_launcher('--config=smoke', f'--launch_type={launch_type}',
                        f'--workdir={workdir}', '--dry_run',
                        env={'TMPDIR': str(shared)})
  assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.skipif(not _AS_NOBODY, reason='needs root and setpriv')
def test_a_default_run_name_cannot_be_made_first_by_someone_else(shared):
  """nobody makes every per-second name of the next two minutes in a shared
  sticky folder; a run there makes its own folder, exclusively, under a
  name with a random part, and touches none of theirs. The disk guard
  stops it right after it took its folder (no process started)."""
  now = time.time()
  names = [f'smoke_{time.strftime("%Y%m%d-%H%M%S", time.localtime(now + s))}'
           for s in range(120)]
  subprocess.run([*NOBODY, 'sh', '-c', f'cd {shared} && mkdir -m 777 '
                  + ' '.join(names)], check=True)
  before = _tree(shared)
  result = run_launcher('--config=smoke', f'--workdir={shared}',
                        '--node_start=exec', '--disk_guard_mb=100000000')
  _refused(result, 'free')
  made = sorted(set(os.listdir(shared)) - set(names))
  assert len(made) == 1, made
  assert re.fullmatch(r'smoke_\d{8}-\d{6}-[0-9a-f]{6}', made[0]), made
  st = os.stat(shared / made[0])
  assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700
  assert {k: v for k, v in _tree(shared).items()
          if not k.startswith(made[0])} == before
