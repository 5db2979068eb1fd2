"""A node's log (run/local_mp/children.py): capped by rotation, private,
never written through a symbolic link."""

import errno
import os
import stat

import pytest

from acme_launch.run.local_mp import children


def test_a_node_log_that_is_a_link_is_never_written_through(tmp_path):
  sentinel = tmp_path / 'sentinel'
  sentinel.write_text('precious\n')
  os.symlink(sentinel, tmp_path / 'actor_0.log')
  with pytest.raises(OSError) as raised:
    children.NodeLog(str(tmp_path / 'actor_0.log'), max_bytes=1000)
  assert raised.value.errno == errno.ELOOP
  assert sentinel.read_text() == 'precious\n'


def test_a_node_log_rotates_into_private_files(tmp_path):
  path = str(tmp_path / 'actor_0.log')
  log = children.NodeLog(path, max_bytes=100, backups=2)
  for i in range(40):
    log.write(f'line {i:03d}\n')
  log.close()
  assert sorted(os.listdir(tmp_path)) == [
      'actor_0.log', 'actor_0.log.1', 'actor_0.log.2']
  for name in os.listdir(tmp_path):
    assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
  with open(path) as f:
    assert f.read().endswith('line 039\n')
