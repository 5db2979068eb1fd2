"""Files replaced whole: a failed write leaves the old file and no temp."""

import json
import os

import pytest

from acme_launch import durable


def test_write_replaces_the_file_and_leaves_nothing_else(tmp_path):
  path = str(tmp_path / 'progress.json')
  durable.write_json(path, {'counts': {'actor_steps': 1}})
  durable.write_json(path, {'counts': {'actor_steps': 2}})
  with open(path) as f:
    assert json.load(f) == {'counts': {'actor_steps': 2}}
  durable.write_atomic(str(tmp_path / 'ckpt-1.digest'), 'ab' * 32)
  with open(tmp_path / 'ckpt-1.digest') as f:
    assert f.read() == 'ab' * 32
  assert sorted(os.listdir(tmp_path)) == ['ckpt-1.digest', 'progress.json']
  assert os.stat(path).st_mode & 0o077 == 0  # mkstemp's 0600.


def test_a_write_that_fails_keeps_the_old_file(tmp_path):
  path = str(tmp_path / 'tracking.json')
  durable.write_json(path, {'old': True})

  class Unwritable:
    def __str__(self):
      raise RuntimeError('cannot')

  with pytest.raises(RuntimeError):
    durable.write_json(path, {'new': Unwritable()})
  with pytest.raises(FileNotFoundError):
    durable.write_atomic(str(tmp_path / 'missing' / 'x.json'), '{}')
  with open(path) as f:
    assert json.load(f) == {'old': True}
  assert os.listdir(tmp_path) == ['tracking.json']
