"""Taking a run directory (acme_launch/run/rundir.py): made or opened and
checked on its descriptor, its files never followed through links, locked.
Real folders, files and flocks; nothing mocked."""

import os
import stat

import pytest

from acme_launch import errors
from acme_launch.run import rundir


@pytest.fixture
def sentinel(tmp_path):
  path = tmp_path / 'sentinel'
  path.write_text('precious\n')
  return path


def test_a_premade_open_run_directory_whose_lock_links_elsewhere_is_refused(
    tmp_path, sentinel):
  run_dir = tmp_path / 'runs' / 'shared'
  os.makedirs(run_dir)
  os.chmod(run_dir, 0o777)
  os.symlink(sentinel, run_dir / '.lock')
  with pytest.raises(errors.LaunchError) as raised:
    rundir.take(str(run_dir))
  assert 'is writable by others (mode 0777)' in str(raised.value)
  assert sentinel.read_text() == 'precious\n'
  assert sorted(os.listdir(run_dir)) == ['.lock']  # Nothing made there.


def test_a_lock_that_links_elsewhere_is_refused_in_the_users_own_directory(
    tmp_path, sentinel):
  run_dir = tmp_path / 'run'
  run_dir.mkdir(mode=0o700)
  os.symlink(sentinel, run_dir / '.lock')
  with pytest.raises(errors.LaunchError) as raised:
    rundir.take(str(run_dir))
  assert str(raised.value) == (
      f'{run_dir}/.lock is a symbolic link; a run directory\'s files are '
      'never opened through links: remove it')
  assert sentinel.read_text() == 'precious\n'


@pytest.mark.parametrize('name', ['config.json', 'summary.json',
                                  'logs/actor_0.log', '.launchpad'])
def test_a_run_file_or_node_log_that_is_a_link_is_refused(tmp_path, sentinel,
                                                          name):
  run_dir = tmp_path / 'run'
  (run_dir / 'logs').mkdir(parents=True, mode=0o700)
  os.chmod(run_dir, 0o700)
  os.symlink(sentinel, run_dir / name)
  with pytest.raises(errors.LaunchError, match=f'{run_dir}/{name} is a '
                     'symbolic link'):
    rundir.take(str(run_dir))
  assert sentinel.read_text() == 'precious\n'


def test_a_fresh_run_directory_is_made_private_and_locked(tmp_path):
  run_dir = str(tmp_path / 'runs' / 'new')
  rundir.take(run_dir, new=True)
  try:
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    assert sorted(os.listdir(run_dir)) == [
        '.lock', 'checkpoints', 'logs', 'metrics', 'nodes']
    with open(os.path.join(run_dir, '.lock')) as f:
      assert f.read() == f'pid {os.getpid()}\n'
    with pytest.raises(errors.LaunchError, match='is in use by pid '):
      rundir.take(run_dir)
  finally:
    rundir.unlock(run_dir)


def test_a_fresh_name_someone_made_first_is_refused_and_left_alone(tmp_path):
  run_dir = tmp_path / 'runs' / 'smoke_20261127-101500-0a1b2c'
  run_dir.mkdir(parents=True, mode=0o700)
  (run_dir / 'config.json').write_text('{"theirs": 1}')
  with pytest.raises(errors.LaunchError, match='was created by someone else'):
    rundir.take(str(run_dir), new=True)
  assert os.listdir(run_dir) == ['config.json']


def test_an_existing_run_directory_of_the_users_resumes(tmp_path):
  run_dir = tmp_path / 'run'
  (run_dir / 'checkpoints' / 'learner').mkdir(parents=True)
  os.chmod(run_dir, 0o700)
  (run_dir / 'config.json').write_text('{}')
  (run_dir / '.lock').write_text('pid 1\n')  # A past launcher's.
  rundir.take(str(run_dir))
  try:
    assert (run_dir / '.lock').read_text() == f'pid {os.getpid()}\n'
    assert (run_dir / 'config.json').read_text() == '{}'
  finally:
    rundir.unlock(str(run_dir))


def test_a_run_folder_that_is_a_link_is_refused(tmp_path):
  run_dir = tmp_path / 'run'
  run_dir.mkdir(mode=0o700)
  (tmp_path / 'elsewhere').mkdir()
  os.symlink(tmp_path / 'elsewhere', run_dir / 'checkpoints')
  with pytest.raises(errors.LaunchError, match='checkpoints is not a folder '
                     'of yours'):
    rundir.take(str(run_dir))
  assert os.listdir(tmp_path / 'elsewhere') == []
