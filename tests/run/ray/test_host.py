"""What a Ray host checks of the run directory (run/ray/host.py) and the
private mirror it makes where it does not see one (run/ray/files.py), in
this process without a cluster: real folders, links and modes; and the
environment of a node process it starts."""

import json
import os
import socket
import stat
import sys
import time

import pytest

from acme_launch.plan import node_env
from acme_launch.run.ray import files as ray_files
from acme_launch.run.ray import host as ray_host

_TEXT = '0123456789abcdef'


@pytest.fixture
def run_dir(tmp_path):
  path = tmp_path / 'runs' / 'run'
  path.mkdir(parents=True, mode=0o700)
  (path / '.ray_shared_check').write_text(_TEXT)
  return path


def _sees(run_dir) -> bool:
  shared, _ = ray_host.NodeHost('actor/0').check_host(
      str(run_dir / '.ray_shared_check'), _TEXT, '127.0.0.1')
  return shared


def test_a_host_sees_a_run_directory_that_passes_with_the_marker(run_dir):
  assert _sees(run_dir)


def test_a_host_does_not_use_a_folder_others_could_change(run_dir):
  os.chmod(run_dir, 0o777)
  assert not _sees(run_dir)
  os.chmod(run_dir, 0o700)
  os.chmod(run_dir.parent, 0o777)   # The workdir.
  assert not _sees(run_dir)


def test_a_marker_read_through_a_link_does_not_count(run_dir, tmp_path):
  (tmp_path / 'copy').write_text(_TEXT)
  os.unlink(run_dir / '.ray_shared_check')
  os.symlink(tmp_path / 'copy', run_dir / '.ray_shared_check')
  assert not _sees(run_dir)
  assert not ray_host.NodeHost('actor/0').check_host(
      str(run_dir / '.ray_shared_check'), 'other text', '127.0.0.1')[0]


def test_a_mirror_is_a_new_private_folder_in_a_checked_temp_folder():
  mirror = ray_files.Mirror()
  try:
    assert stat.S_IMODE(os.stat(mirror.root).st_mode) == 0o700
    assert sorted(os.listdir(mirror.root)) == [
        'checkpoints', 'logs', 'metrics', 'nodes']
  finally:
    mirror.remove()


def test_appending_a_pulled_log_never_follows_a_link(run_dir, tmp_path):
  sentinel = tmp_path / 'sentinel'
  sentinel.write_text('precious\n')
  (run_dir / 'logs').mkdir()
  os.symlink(sentinel, run_dir / 'logs' / 'actor_0.log')
  ray_files.apply(str(run_dir), [('logs/actor_0.log', 'append', b'x\n'),
                                 ('logs/actor_1.log', 'append', b'y\n')])
  assert sentinel.read_text() == 'precious\n'
  assert (run_dir / 'logs' / 'actor_1.log').read_text() == 'y\n'


_PRINT_ENV = 'import json, os; print(json.dumps(sorted(os.environ)))'


def test_a_node_started_on_a_ray_host_gets_no_credentials_but_passed_ones(
    tmp_path, monkeypatch):
  for name in ('WANDB_API_KEY', 'AWS_SECRET_ACCESS_KEY', 'HF_TOKEN'):
    monkeypatch.setenv(name, 'secret')
  monkeypatch.setenv('ACME_TEST_PLAIN', 'kept')
  log = tmp_path / 'actor_0.log'
  host = ray_host.NodeHost('actor/0')
  try:
    with pytest.raises(RuntimeError, match='allow_hosts'):
      host.start([sys.executable, '-c', _PRINT_ENV], {}, 'job.pkl', b'',
                 str(log))
    host.allow_hosts(['10.0.0.1', '10.0.0.2'])
    host.start([sys.executable, '-c', _PRINT_ENV],
               node_env.NodeEnv(pass_env=('HF_TOKEN',)).to_environ(),
               str(tmp_path / 'job.pkl'), b'', str(log))
    deadline = time.time() + 60
    while host.poll() is None and time.time() < deadline:
      time.sleep(0.1)
    assert host.poll() == 0, log.read_text()
  finally:
    host.kill()
  names = set(json.loads(log.read_text().strip().splitlines()[-1]))
  assert {'ACME_TEST_PLAIN', 'HF_TOKEN', 'ACME_LAUNCH_HOSTS_FILE'} <= names
  assert not names & {'WANDB_API_KEY', 'AWS_SECRET_ACCESS_KEY'}


def test_the_run_s_hosts_are_a_private_file_replaced_whole_and_removed_at_kill():
  host = ray_host.NodeHost('actor/0')
  path = host.allow_hosts(['10.0.0.1', '10.0.0.2'])
  try:
    assert open(path).read() == '10.0.0.1\n10.0.0.2\n'
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    inode = os.stat(path).st_ino
    host.allow_hosts(['10.0.0.3'])  # A node moved: a new file, renamed in.
    assert open(path).read() == '10.0.0.3\n'
    assert os.stat(path).st_ino != inode
  finally:
    host.kill()
  assert not os.path.exists(os.path.dirname(path))


def test_a_host_holds_its_node_s_ports_until_kill():
  host = ray_host.NodeHost('learner/0')
  held = host.free_ports('127.0.0.1', 2)
  try:
    assert len(set(held)) == 2
    for port in held:  # Nobody else binds them (run/ports.py) ...
      with socket.socket() as s, pytest.raises(OSError, match='in use'):
        s.bind(('127.0.0.1', port))
  finally:
    host.kill()
  for port in held:  # ... until the node is gone.
    with socket.socket() as s:
      s.bind(('127.0.0.1', port))
