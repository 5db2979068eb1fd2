"""The compilation cache folder: which one the nodes get, and when none."""

import os
import subprocess

import pytest

from acme_launch import compilation_cache
from acme_launch import act


def test_a_writable_folder_is_created_private_and_used(tmp_path):
  folder = tmp_path / 'a' / 'jax'
  assert compilation_cache.usable(str(folder)) == (str(folder), '')
  assert oct(os.stat(folder).st_mode & 0o777) == '0o700'
  assert os.listdir(folder) == []  # The probe file is gone.


def test_a_folder_that_cannot_be_made_is_refused_with_why(tmp_path):
  (tmp_path / 'file').write_text('')
  path, why = compilation_cache.usable(str(tmp_path / 'file' / 'jax'))
  assert path == ''
  assert why == f'{tmp_path}/file/jax: Not a directory'


def test_a_full_filesystem_is_refused_with_why(tmp_path):
  mount = tmp_path / 'small'
  mount.mkdir()
  if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs',
                     str(mount)], capture_output=True).returncode != 0:
    pytest.skip('cannot mount a small tmpfs here (needs root)')
  try:
    path, why = compilation_cache.usable(str(mount / 'jax'))
    assert path == ''
    assert why.startswith(f'{mount}/jax: only ') and why.endswith(' MiB free')
  finally:
    subprocess.run(['umount', str(mount)], check=True)


def test_the_default_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  assert compilation_cache.default_dir() == f'{tmp_path}/acme-launch/jax'
  monkeypatch.delenv('XDG_CACHE_HOME')
  monkeypatch.setenv('HOME', str(tmp_path))
  assert compilation_cache.default_dir() == f'{tmp_path}/.cache/acme-launch/jax'


def test_the_launcher_hands_nodes_a_checked_folder_or_none(monkeypatch, tmp_path):
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  notes = []
  assert act._compilation_cache('', 'local_mp', notes) == f'{tmp_path}/acme-launch/jax'
  assert act._compilation_cache(f'{tmp_path}/mine', 'local_mp', notes) == f'{tmp_path}/mine'
  assert act._compilation_cache('none', 'local_mp', notes) == ''
  # Nodes that are threads of the launcher, and Ray hosts that check their own.
  assert act._compilation_cache('', 'local_mt', notes) == ''
  assert act._compilation_cache('', 'ray', notes) == 'default'
  assert act._compilation_cache('/x/jax', 'ray', notes) == '/x/jax'
  assert notes == []
  (tmp_path / 'file').write_text('')
  assert act._compilation_cache(f'{tmp_path}/file/jax', 'local_mp', notes) == ''
  assert notes == [f'warning: no compilation cache ({tmp_path}/file/jax: Not a '
                   'directory); every node compiles its functions as usual']
