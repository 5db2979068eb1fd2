"""What a sweep launcher killed with `kill -9` leaves of its Ray instance
is removed by the next one (the instance itself: tests/e2e/sweep/)."""

import os
import subprocess

from acme_launch.sweep import local_ray


def _folder(parent, name, pid=None):
  path = parent / name
  path.mkdir()
  (path / 'ray').mkdir()
  if pid is not None:
    (path / 'pid').write_text(str(pid))
  return path


def test_only_this_users_folders_whose_launcher_is_gone_are_removed(tmp_path):
  dead = subprocess.Popen(['true'])
  dead.wait()
  abandoned = _folder(tmp_path, local_ray.PREFIX + 'dead', dead.pid)
  running = _folder(tmp_path, local_ray.PREFIX + 'alive', os.getpid())
  starting = _folder(tmp_path, local_ray.PREFIX + 'nopid')
  other = _folder(tmp_path, 'something-else', dead.pid)
  local_ray.remove_abandoned(str(tmp_path))
  assert not abandoned.exists()
  assert running.exists() and starting.exists() and other.exists()
