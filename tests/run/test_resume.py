"""Before a resume: a corrupt replay save is set aside for good, with real
Reverb servers and checkpoints in this process."""

import os
import shutil

import numpy as np
import reverb

from acme_launch import layout
from acme_launch.run import resume


def _server(replay_dir: str) -> reverb.Server:
  """A server with one table, restoring the newest save under replay_dir
  as the replay node's does (Reverb's DefaultCheckpointer)."""
  table = reverb.Table(name='t', sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=1000,
                       rate_limiter=reverb.rate_limiters.MinSize(1))
  return reverb.Server(
      tables=[table], port=None,
      checkpointer=reverb.checkpointers.DefaultCheckpointer(replay_dir))


def _client(server: reverb.Server) -> reverb.Client:
  return reverb.Client(f'localhost:{server.port}')


def _size(server: reverb.Server) -> int:
  return _client(server).server_info()['t'].current_size


def _insert(server: reverb.Server, count: int) -> None:
  client = _client(server)
  for i in range(count):
    client.insert([np.array(i, dtype=np.int64)], priorities={'t': 1.0})


def test_reverb_keeps_one_save_whatever_the_config_asks(tmp_path):
  replay_dir = str(tmp_path / 'replay')
  server = _server(replay_dir)
  try:
    _insert(server, 3)
    for _ in range(3):
      _client(server).checkpoint()
    assert len(layout.complete_replay_checkpoints(replay_dir)) == 1
  finally:
    server.stop()


def test_a_corrupt_replay_save_is_never_loaded_again(tmp_path):
  run_dir = str(tmp_path / 'run')
  replay_dir = layout.component_dir(run_dir, 'replay')
  # An older good save of 10 items and a newer one of 20. Reverb keeps only
  # its newest, so the older one is copied aside and put back.
  server = _server(replay_dir)
  try:
    _insert(server, 10)
    older = _client(server).checkpoint()
    shutil.copytree(older, str(tmp_path / 'older'))
    _insert(server, 10)
    newer = _client(server).checkpoint()
  finally:
    server.stop()
  shutil.copytree(str(tmp_path / 'older'), older)
  assert layout.complete_replay_checkpoints(replay_dir) == [older, newer]
  for name in os.listdir(newer):  # Bad data behind its DONE marker.
    if name.endswith('.tfrecord'):
      with open(os.path.join(newer, name), 'wb') as f:
        f.write(b'\x00not a record' * 64)

  state = resume.verify_for_resume(run_dir)
  assert state.checkpoints['replay'] == older
  [warning] = state.warnings
  assert f'replay checkpoint {newer} unreadable, moved to {newer}.corrupt' in (
      warning)
  assert not os.path.exists(os.path.join(newer + '.corrupt', 'DONE'))

  # Neither the next resume nor Reverb's own load-latest takes it again
  # (with its DONE marker kept, '<newer>.corrupt' sorts last: Reverb's pick).
  again = resume.verify_for_resume(run_dir)
  assert again.checkpoints['replay'] == older and again.warnings == []
  server = _server(replay_dir)
  try:
    assert _size(server) == 10
  finally:
    server.stop()
