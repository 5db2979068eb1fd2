"""Folders nobody else can change: run, sweep and work directories and the
compilation cache, checked on what is opened, not on a path looked at
before.

A run directory holds what node processes load and run: Launchpad's pickled
program (`.launchpad/*/job.pkl`), the saved config naming the agent module
and the folders put first on every node's PYTHONPATH, checkpoints; the
compilation cache holds compiled code the nodes load. Whoever can write to
such a folder, or swap it for another, runs code as the user. So:

  - a private folder (a run or sweep directory, the compilation cache) must
    be a directory, not a symbolic link, owned by this user and writable by
    nobody else (the sticky bit does not help here: others could still
    create the files a run is about to create); write access for the
    user's own private group (no other member, nobody else's primary
    group: what umask 002 gives on Debian and Ubuntu) is the user's alone;
  - the folder that holds it (the workdir; the cache's parent) must be a
    directory, not a symbolic link, owned by this user or root and writable
    by nobody else, unless it has the sticky bit: in a shared folder such as
    /tmp others may create entries, but not rename or remove ours;
  - both are checked with fstat on the descriptors opened with O_NOFOLLOW
    (the private one through openat from the holding one), so the check is
    on the inodes used; a new folder is made with mkdirat, exclusively when
    its name was chosen at random (`open_checked(create='new')`);
  - files inside are opened through the checked folder's descriptor with
    O_NOFOLLOW (`open_file`, `read_file`).

Folders above the workdir are the system's and are followed as usual.
Names of run and sweep directories are one path component of safe
characters (`check_name`): no '/', no '..', no glob characters, which TF's
and Reverb's checkpoint code match paths with.
"""

import errno
import grp
import os
import pwd
import re
import stat
import tempfile
from typing import Optional

from acme_launch import errors

# Letters, digits and . _ , = + - (a sweep's point names use them all);
# not starting with '.': no '.', '..' or hidden names.
_NAME = re.compile(r'[A-Za-z0-9_,=+-][A-Za-z0-9._,=+-]*\Z')
_UNSAFE_CHARACTER = re.compile(r'[^A-Za-z0-9._,=+-]')
MAX_NAME_LENGTH = 200   # Room for suffixes under the filesystems' 255.
NAME_RULE = ('one folder name of letters, digits and . _ , = + - '
             f'(not starting with ., at most {MAX_NAME_LENGTH} characters)')

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def is_safe_name(name: str) -> bool:
  """Whether `name` may name a run or sweep directory."""
  return len(name) <= MAX_NAME_LENGTH and bool(_NAME.match(name))


def check_name(name: str, flag: str = '--run_name') -> None:
  """LaunchError (one line) unless `name` is a safe folder name."""
  if not is_safe_name(name):
    raise errors.LaunchError(
        f'{flag}={name!r} is refused: a run name is {NAME_RULE}')


def safe_name(text: str, fallback: str = 'run') -> str:
  """`text` made a safe name: other characters '_', no leading '.'."""
  name = _UNSAFE_CHARACTER.sub('_', text).lstrip('.')[:MAX_NAME_LENGTH // 2]
  return name or fallback


def _user(uid: int) -> str:
  try:
    return pwd.getpwuid(uid).pw_name
  except KeyError:
    return f'uid {uid}'


def is_private_group(gid: int, uid: int) -> bool:
  """Whether group `gid` is user `uid`'s own (a user private group, as
  Debian and Ubuntu make one per account with umask 002): no other account
  is a member or has it as its primary group. Write access for such a group
  is write access for that user alone (OpenSSH's StrictModes reads it so)."""
  try:
    group = grp.getgrgid(gid)
    owner = pwd.getpwuid(uid).pw_name
  except KeyError:
    return False
  if set(group.gr_mem) - {owner}:
    return False
  return all(p.pw_gid != gid or p.pw_uid == uid for p in pwd.getpwall())


def problem_of(st: os.stat_result, what: str, path: str, shared: bool) -> str:
  """Why a folder with status `st` (lstat's or fstat's) is unsafe ('' if
  it is not): the rules of the module docstring, `shared` the holding
  folder's."""
  mode = st.st_mode
  if stat.S_ISLNK(mode):
    return (f'{what} {path} is a symbolic link; links are not followed '
            'there: give the folder it points to, if it is yours')
  if not stat.S_ISDIR(mode):
    return f'{what} {path} is not a directory'
  sticky = bool(mode & stat.S_ISVTX)
  if shared and sticky:
    return ''  # Like /tmp: others may add entries, not rename ours.
  me = os.geteuid()
  if st.st_uid != me and not (shared and st.st_uid == 0):
    return (f'{what} {path} belongs to {_user(st.st_uid)}, not to you '
            f'({_user(me)}): refused, its owner could change what a run '
            'reads there')
  writers = stat.S_IWOTH | (
      0 if is_private_group(st.st_gid, st.st_uid) else stat.S_IWGRP)
  if mode & writers:
    sticky_note = ' and no sticky bit' if shared else ''
    return (f'{what} {path} is writable by others (mode '
            f'{stat.S_IMODE(mode):04o}{sticky_note}): refused, they could '
            'change what a run reads there')
  return ''


def _open_dir(name: str, dir_fd: Optional[int], path: str, what: str,
              shared: bool) -> int:
  """A descriptor of folder `name` (relative to `dir_fd`, or a path),
  opened without following a link and checked; FileNotFoundError if it is
  not there, LaunchError if it is unsafe or cannot be opened."""
  try:
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
  except FileNotFoundError:
    raise
  except OSError as e:
    why = ''
    if e.errno in (errno.ELOOP, errno.ENOTDIR):  # A link, or not a folder.
      try:
        why = problem_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False),
                         what, path, shared)
      except OSError:
        pass
    raise errors.LaunchError(
        why or f'cannot open {what} {path}: {e.strerror}') from None
  try:
    why = problem_of(os.fstat(fd), what, path, shared)
  except BaseException:
    os.close(fd)
    raise
  if why:
    os.close(fd)
    raise errors.LaunchError(why)
  return fd


def open_checked(path: str, what: str, holder: str = 'workdir', *,
                 create: str = '', missing_ok: bool = False) -> Optional[int]:
  """A descriptor of the private folder `path`, checked with the folder
  holding it (`holder` names it in messages), both opened without
  following links (see the module docstring).

  `create`: '' opens an existing folder; 'any' makes it (and the folders
  above it) if missing; 'new' makes it exclusively: LaunchError if it is
  already there. A missing folder is LaunchError, or None if `missing_ok`.
  The caller closes the descriptor.
  """
  path = os.path.abspath(path)
  parent, name = os.path.split(path)
  if not name:
    raise errors.LaunchError(f'{what} {path} is not a folder of its own')
  if create:
    try:
      os.makedirs(parent, mode=0o700, exist_ok=True)
    except OSError as e:
      raise errors.LaunchError(
          f'cannot create {holder} {parent}: {e.strerror}') from None
  try:
    parent_fd = _open_dir(parent, None, parent, holder, shared=True)
  except FileNotFoundError:
    if missing_ok:
      return None
    raise errors.LaunchError(f'{what} {path} does not exist') from None
  try:
    if create:
      try:
        os.mkdir(name, mode=0o700, dir_fd=parent_fd)
      except FileExistsError:
        if create == 'new':
          raise errors.LaunchError(
              f'{what} {path} was created by someone else meanwhile; '
              'refused (a new run never uses a folder it did not make)'
          ) from None
      except OSError as e:
        raise errors.LaunchError(
            f'cannot create {what} {path}: {e.strerror}') from None
    try:
      return _open_dir(name, parent_fd, path, what, shared=False)
    except FileNotFoundError:
      if missing_ok:
        return None
      raise errors.LaunchError(f'{what} {path} does not exist') from None
  finally:
    os.close(parent_fd)


def check(path: str, what: str, holder: str = 'workdir', *,
          missing_ok: bool = True) -> None:
  """open_checked's checks alone (the decision's, before anything acts):
  LaunchError if `path` or its holder is unsafe; a missing folder passes
  when `missing_ok` (it will be made)."""
  fd = open_checked(path, what, holder, missing_ok=missing_ok)
  if fd is not None:
    os.close(fd)


def check_shared(path: str, what: str) -> None:
  """LaunchError unless the folder `path` may hold private folders (the
  holding folder's rule: sticky, or this user's or root's and writable by
  nobody else; not a link)."""
  try:
    fd = _open_dir(path, None, path, what, shared=True)
  except FileNotFoundError:
    raise errors.LaunchError(f'{what} {path} does not exist') from None
  os.close(fd)


def private_temp_folder(prefix: str, what: str) -> str:
  """A new folder of tempfile.mkdtemp's (made exclusively, 0700), checked
  with the temp folder holding it; LaunchError (the folder removed) if
  either is unsafe."""
  path = tempfile.mkdtemp(prefix=prefix)
  try:
    check(path, what, 'temp folder', missing_ok=False)
  except errors.LaunchError:
    os.rmdir(path)
    raise
  return path


def open_file(dir_fd: int, name: str, flags: int, path: str,
              mode: int = 0o600) -> int:
  """A descriptor of file `name` in the checked folder `dir_fd`, never
  through a link: LaunchError if it is a link, not a regular file, or
  (when it may be written) not this user's. FileNotFoundError passes."""
  try:
    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                 dir_fd=dir_fd)
  except FileNotFoundError:
    raise
  except OSError as e:
    if e.errno == errno.ELOOP:
      raise errors.LaunchError(
          f'{path} is a symbolic link; a run directory\'s files are never '
          'opened through links: remove it') from None
    raise errors.LaunchError(f'cannot open {path}: {e.strerror}') from None
  st = os.fstat(fd)
  writes = flags & (os.O_WRONLY | os.O_RDWR)
  why = ''
  if not stat.S_ISREG(st.st_mode):
    why = f'{path} is not a regular file'
  elif writes and st.st_uid != os.geteuid():
    why = f'{path} belongs to {_user(st.st_uid)}, not to you'
  if why:
    os.close(fd)
    raise errors.LaunchError(why)
  return fd


def read_file(folder: str, name: str, what: str,
              holder: str = 'workdir') -> Optional[bytes]:
  """The bytes of `folder`/`name`, read through the checked folder without
  following links; None if the folder or the file is not there.
  LaunchError if the folder, its holder or the file is unsafe."""
  folder_fd = open_checked(folder, what, holder, missing_ok=True)
  if folder_fd is None:
    return None
  try:
    fd = open_file(folder_fd, name, os.O_RDONLY,
                   os.path.join(os.path.abspath(folder), name))
  except FileNotFoundError:
    return None
  finally:
    os.close(folder_fd)
  with os.fdopen(fd, 'rb') as f:
    return f.read()


def is_same_folder(path: str, fd: int) -> bool:
  """Whether `path` names the folder open as `fd` now (device and inode)."""
  try:
    st = os.stat(path)
  except OSError:
    return False
  opened = os.fstat(fd)
  return (st.st_dev, st.st_ino) == (opened.st_dev, opened.st_ino)


def open_append_nofollow(path: str) -> int:
  """A log file opened for appending (made 0600 if missing), never through
  a link: OSError (ELOOP) if `path` is one."""
  return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND |
                 os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
