"""Folders nobody else can change (acme_launch/safe_dirs.py): names, the
checks on opened folders, and files never opened through links.

Real folders in the test's temp folder; as root, folders of another user
are made with chown (uid 65534, nobody), else those cases are skipped. As
root, folders get the group nogroup (65534: nobody's primary group, so its
write bit means others); otherwise they keep the user's own group, which
counts as the user's alone when it is a private group.
"""

import glob
import os
import stat

from hypothesis import HealthCheck, given, settings, strategies as st
import pytest

from acme_launch import errors
from acme_launch import safe_dirs

NOBODY = 65534
NOGROUP = 65534
IS_ROOT = os.geteuid() == 0
# Whether a group write bit means the user alone on the folders made here.
GROUP_IS_MINE = (not IS_ROOT and
                 safe_dirs.is_private_group(os.getegid(), os.geteuid()))


@pytest.mark.parametrize('name', [
    '', '.', '..', '.hidden', 'a/b', '/', '/abs', 'a/../b', 'a[1]', 'a*',
    'a?', 'a b', 'a\nb', 'a\x00b', 'ü', 'a\\b', '~', '$HOME', 'a' * 201])
def test_unsafe_run_names_are_refused_in_one_line(name):
  assert not safe_dirs.is_safe_name(name)
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check_name(name)
  assert '\n' not in str(raised.value)
  assert str(raised.value).startswith(f'--run_name={name!r} is refused')


@pytest.mark.parametrize('name', [
    'run', 'smoke_20261127-101500-0a1b2c', 'seed=0,ppo.learning_rate=0.001',
    'a+b', '-x', '_..', 'a' * 200])
def test_safe_run_names_pass(name):
  safe_dirs.check_name(name)


@settings(max_examples=500, deadline=None, database=None)
@given(name=st.text(max_size=40))
def test_a_safe_name_is_one_plain_component_of_any_folder(name):
  """Whatever the text: a name that passes stays one folder under the
  workdir, is no glob pattern (TF and Reverb glob checkpoint paths) and no
  hidden or parent folder; safe_name makes any text a name that passes."""
  if safe_dirs.is_safe_name(name):
    assert os.path.basename(name) == name and '/' not in name
    assert name not in ('.', '..') and not name.startswith('.')
    assert not glob.has_magic(name) and '\x00' not in name
    workdir = os.path.join(os.sep, 'any', 'workdir')  # Not read: paths only.
    joined = os.path.normpath(os.path.join(workdir, name))
    assert os.path.dirname(joined) == workdir
    assert name.isascii() and name.isprintable()
  assert safe_dirs.is_safe_name(safe_dirs.safe_name(name))


def _folder(path, mode, uid=None):
  os.mkdir(path)
  os.chmod(path, mode)
  if IS_ROOT:
    os.chown(path, -1 if uid is None else uid, NOGROUP)
    os.chmod(path, mode)  # Again: chown may clear set-id bits.
  return str(path)


def test_a_private_folder_of_the_users_passes_and_is_opened(tmp_path):
  run_dir = _folder(tmp_path / 'run', 0o700)
  fd = safe_dirs.open_checked(run_dir, 'run directory')
  try:
    assert safe_dirs.is_same_folder(run_dir, fd)
  finally:
    os.close(fd)


@pytest.mark.parametrize('mode', [0o777, 0o770, 0o720, 0o702, 0o1777, 0o1770])
def test_a_run_directory_others_can_write_to_is_refused_sticky_or_not(
    tmp_path, mode):
  if GROUP_IS_MINE and not mode & 0o002:
    pytest.skip("the folders' group here is the user's private group")
  run_dir = _folder(tmp_path / 'run', mode)
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check(run_dir, 'run directory')
  assert str(raised.value) == (
      f'run directory {run_dir} is writable by others (mode {mode:04o}): '
      'refused, they could change what a run reads there')


@pytest.mark.skipif(not IS_ROOT, reason='needs root to set a folder\'s group')
def test_a_folder_writable_by_the_users_own_private_group_passes(tmp_path):
  # Debian and Ubuntu give each account a group of its own and umask 002:
  # a group write bit there is the user's alone. root's group 0 has no
  # other member and is no one else's primary group.
  assert safe_dirs.is_private_group(0, 0)
  assert not safe_dirs.is_private_group(NOGROUP, 0)
  workdir = tmp_path / 'work'
  os.mkdir(workdir, 0o775)
  os.chown(workdir, 0, 0)
  os.chmod(workdir, 0o775)
  run_dir = workdir / 'run'
  os.mkdir(run_dir)
  os.chown(run_dir, 0, 0)
  os.chmod(run_dir, 0o770)
  safe_dirs.check(str(run_dir), 'run directory', missing_ok=False)
  os.chown(run_dir, 0, NOGROUP)   # A group others are in: refused.
  os.chmod(run_dir, 0o770)
  with pytest.raises(errors.LaunchError, match='is writable by others'):
    safe_dirs.check(str(run_dir), 'run directory', missing_ok=False)


def test_a_workdir_others_can_write_to_is_refused_unless_sticky(tmp_path):
  open_dir = _folder(tmp_path / 'open', 0o777)
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check(os.path.join(open_dir, 'run'), 'run directory')
  assert str(raised.value) == (
      f'workdir {open_dir} is writable by others (mode 0777 and no sticky '
      'bit): refused, they could change what a run reads there')
  shared = _folder(tmp_path / 'shared', 0o1777)   # As /tmp.
  safe_dirs.check(os.path.join(shared, 'run'), 'run directory')
  run_dir = _folder(tmp_path / 'shared' / 'run', 0o700)
  safe_dirs.check(run_dir, 'run directory', missing_ok=False)


@pytest.mark.skipif(not IS_ROOT,
                    reason='needs root to make folders of another user')
def test_folders_of_another_user_are_refused_but_a_sticky_or_root_workdir_holds(
    tmp_path):
  theirs = _folder(tmp_path / 'theirs', 0o700, NOBODY)
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check(theirs, 'run directory')
  assert str(raised.value).startswith(
      f'run directory {theirs} belongs to nobody, not to you (root)')
  with pytest.raises(errors.LaunchError, match='workdir .* belongs to nobody'):
    safe_dirs.check(os.path.join(theirs, 'run'), 'run directory')
  # A shared sticky folder of another user's, like /tmp: ours inside holds.
  _folder(tmp_path / 'shared', 0o1777, NOBODY)
  safe_dirs.check(_folder(tmp_path / 'shared' / 'mine', 0o700), 'run directory')


def test_links_are_refused_as_workdir_and_as_run_directory(tmp_path):
  real = _folder(tmp_path / 'real', 0o700)
  _folder(tmp_path / 'real' / 'run', 0o700)
  os.symlink(real, tmp_path / 'workdir_link')
  os.symlink(os.path.join(real, 'run'), tmp_path / 'real' / 'run_link')
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check(str(tmp_path / 'workdir_link' / 'run'), 'run directory')
  assert str(raised.value).startswith(
      f'workdir {tmp_path}/workdir_link is a symbolic link; links are not '
      'followed there')
  with pytest.raises(errors.LaunchError, match='run directory .*/run_link is '
                     'a symbolic link'):
    safe_dirs.check(os.path.join(real, 'run_link'), 'run directory')


def test_a_file_is_not_a_folder(tmp_path):
  (tmp_path / 'file').write_text('x')
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check(str(tmp_path / 'file'), 'run directory')
  assert str(raised.value) == (
      f'run directory {tmp_path}/file is not a directory')
  with pytest.raises(errors.LaunchError) as raised:
    safe_dirs.check(str(tmp_path / 'file' / 'run'), 'run directory')
  assert str(raised.value) == f'workdir {tmp_path}/file is not a directory'


def test_a_new_folder_is_made_exclusively(tmp_path):
  workdir = _folder(tmp_path / 'w', 0o700)
  fd = safe_dirs.open_checked(os.path.join(workdir, 'new'), 'run directory',
                              create='new')
  os.close(fd)
  assert stat.S_IMODE(os.stat(os.path.join(workdir, 'new')).st_mode) == 0o700
  (tmp_path / 'w' / 'new' / 'kept').write_text('saved')
  with pytest.raises(errors.LaunchError, match='was created by someone else '
                     'meanwhile; refused'):
    safe_dirs.open_checked(os.path.join(workdir, 'new'), 'run directory',
                           create='new')
  assert (tmp_path / 'w' / 'new' / 'kept').read_text() == 'saved'


def test_files_are_never_opened_through_links(tmp_path):
  run_dir = _folder(tmp_path / 'run', 0o700)
  sentinel = tmp_path / 'sentinel'
  sentinel.write_text('precious')
  os.symlink(sentinel, tmp_path / 'run' / '.lock')
  fd = safe_dirs.open_checked(run_dir, 'run directory')
  try:
    with pytest.raises(errors.LaunchError) as raised:
      safe_dirs.open_file(fd, '.lock', os.O_RDWR | os.O_CREAT,
                          os.path.join(run_dir, '.lock'))
  finally:
    os.close(fd)
  assert str(raised.value).startswith(f'{run_dir}/.lock is a symbolic link')
  with pytest.raises(OSError):
    safe_dirs.open_append_nofollow(os.path.join(run_dir, '.lock'))
  assert sentinel.read_text() == 'precious'


def test_read_file_reads_only_through_a_checked_folder(tmp_path):
  run_dir = _folder(tmp_path / 'run', 0o700)
  (tmp_path / 'run' / 'config.json').write_text('{}')
  assert safe_dirs.read_file(run_dir, 'config.json', 'run directory') == b'{}'
  assert safe_dirs.read_file(run_dir, 'none.json', 'run directory') is None
  assert safe_dirs.read_file(str(tmp_path / 'gone'), 'config.json',
                             'run directory') is None
  os.chmod(run_dir, 0o777)
  with pytest.raises(errors.LaunchError, match='writable by others'):
    safe_dirs.read_file(run_dir, 'config.json', 'run directory')


_MODES = st.sampled_from([0o700, 0o755, 0o750, 0o770, 0o775, 0o777, 0o1777,
                          0o1700, 0o1770, 0o2770, 0o500])


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workdir_mode=_MODES, run_mode=_MODES,
       workdir_owner=st.sampled_from(['me', 'root', 'nobody']),
       run_owner=st.sampled_from(['me', 'nobody']),
       workdir_link=st.booleans(), run_link=st.booleans())
def test_any_folder_pair_passes_exactly_when_nobody_else_can_change_it(
    tmp_path_factory, workdir_mode, run_mode, workdir_owner, run_owner,
    workdir_link, run_link):
  """The rule, stated apart from the code: a run directory passes iff it
  is no link, is mine and nobody else may write to it, and its workdir is
  no link and either sticky or mine/root's and writable by nobody else."""
  uids = {'me': os.geteuid(), 'root': 0, 'nobody': NOBODY}
  if not IS_ROOT and (workdir_owner, run_owner) != ('me', 'me'):
    return  # chown needs root.
  base = tmp_path_factory.mktemp('pair')
  real_workdir = base / 'real_workdir'
  os.mkdir(real_workdir)
  real_run = real_workdir / 'real_run'
  os.mkdir(real_run)
  (real_run / 'config.json').write_text('{"saved": 1}')
  os.chown(real_run, uids[run_owner], NOGROUP if IS_ROOT else -1)
  os.chmod(real_run, run_mode)
  if run_link:
    os.symlink(real_run, real_workdir / 'run')
  else:
    os.rename(real_run, real_workdir / 'run')
  os.chown(real_workdir, uids[workdir_owner], NOGROUP if IS_ROOT else -1)
  os.chmod(real_workdir, workdir_mode)
  workdir = base / 'workdir'
  if workdir_link:
    os.symlink(real_workdir, workdir)
  else:
    os.rename(real_workdir, workdir)
  me = os.geteuid()
  others = 0o002 if GROUP_IS_MINE else 0o022  # Write bits that are others'.
  workdir_ok = not workdir_link and (
      bool(workdir_mode & 0o1000) or
      (uids[workdir_owner] in (me, 0) and not workdir_mode & others))
  run_ok = not run_link and uids[run_owner] == me and not run_mode & others
  try:
    safe_dirs.check(str(workdir / 'run'), 'run directory', missing_ok=False)
    passed = True
  except errors.LaunchError as e:
    assert '\n' not in str(e)
    passed = False
  assert passed == (workdir_ok and run_ok)
  # Checking changed nothing.
  os.chmod(workdir, 0o700)
  target = workdir / 'run' if not run_link else workdir / 'real_run'
  os.chmod(target, 0o700)
  assert (target / 'config.json').read_text() == '{"saved": 1}'
