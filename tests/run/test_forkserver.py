"""Which nodes --node_start=fork forks, and which it leaves to exec; a
forked node whose server is gone."""

import os
import select
import time

from acme_launch.node import forkserver as node_forkserver
from acme_launch.run import forkserver

_NODE = {'ACME_LAUNCH_NODE': 'actor/0', 'ACME_LAUNCH_CPUS': '0-1',
         'CUDA_VISIBLE_DEVICES': '', 'JAX_PLATFORMS': 'cpu',
         'TF_CPP_MIN_LOG_LEVEL': '2', 'OMP_NUM_THREADS': '2',
         'PYTHONPATH': '/repo', 'PYTHONUNBUFFERED': '1',
         'LD_PRELOAD': '/shim.so'}


def test_server_env_is_a_node_env_without_our_per_node_settings():
  env = forkserver.server_env(_NODE)
  assert 'ACME_LAUNCH_NODE' not in env and 'ACME_LAUNCH_CPUS' not in env
  assert env['LD_PRELOAD'] == '/shim.so' and env['JAX_PLATFORMS'] == 'cpu'


def test_a_node_that_differs_only_in_per_node_or_later_read_values_is_forked():
  server = forkserver.server_env(_NODE)
  other = {**_NODE, 'ACME_LAUNCH_NODE': 'learner/0', 'ACME_LAUNCH_CPUS': '1',
           'ACME_LAUNCH_TF_INTRA_OP_THREADS': '1', 'XLA_FLAGS': '--xla_x=1'}
  assert forkserver.why_not_forked(other, server) == ''


def test_import_time_variables_that_differ_mean_exec():
  server = forkserver.server_env(_NODE)
  assert forkserver.why_not_forked({**_NODE, 'JAX_PLATFORMS': 'cuda,cpu'},
                                   server) == (
      "its JAX_PLATFORMS differ from the fork server's")
  extra = {**_NODE, 'JAX_ENABLE_X64': '1', 'TF_CPP_MIN_LOG_LEVEL': '0'}
  assert 'JAX_ENABLE_X64, TF_CPP_MIN_LOG_LEVEL' in forkserver.why_not_forked(
      extra, server)
  # numpy's OpenBLAS reads OMP_NUM_THREADS when numpy is imported.
  assert 'OMP_NUM_THREADS' in forkserver.why_not_forked(
      {**_NODE, 'OMP_NUM_THREADS': '1'}, server)
  missing = {k: v for k, v in _NODE.items() if k != 'LD_PRELOAD'}
  assert 'LD_PRELOAD' in forkserver.why_not_forked(missing, server)


def test_a_node_that_sees_a_gpu_is_never_forked():
  server = forkserver.server_env({**_NODE, 'CUDA_VISIBLE_DEVICES': '0'})
  assert forkserver.why_not_forked({**_NODE, 'CUDA_VISIBLE_DEVICES': '0'},
                                   server) == 'it sees a GPU'


def test_only_the_node_entry_is_forked():
  server = forkserver.server_env(_NODE)
  assert forkserver.why_not_forked(
      _NODE, server, ['/venv/bin/python', '-m', 'acme_launch.node.entry',
                      '--data_file=x']) == ''
  assert 'not the node entry' in forkserver.why_not_forked(
      _NODE, server, ['/venv/bin/python', '-c', 'print(1)'])


def test_the_first_node_that_may_be_forked_gives_the_server_its_environment():
  entry = ['/venv/bin/python', *forkserver.ENTRY_ARGV]
  gpu_learner = {**_NODE, 'ACME_LAUNCH_NODE': 'learner/0',
                 'CUDA_VISIBLE_DEVICES': '0'}
  commands = [('learner/0', entry, gpu_learner),
              ('actor/0', entry, _NODE),
              ('evaluator/0', entry, {**_NODE, 'OMP_NUM_THREADS': '1'})]
  argv, env = forkserver.first_forkable(commands)
  assert argv == entry and env == forkserver.server_env(_NODE)
  # --debug_node's node is skipped; none left that may be forked: None.
  argv, env = forkserver.first_forkable(commands, skip='actor/0')
  assert env['OMP_NUM_THREADS'] == '1'
  assert forkserver.first_forkable(commands[:1]) is None


def _node_ran_on(server_waits: bool) -> bytes:
  """A stand-in fork server forks a node that calls the server's
  _die_with_parent half a second later; the server waits for it, or exits
  at once. What the node wrote after the call."""
  read_end, write_end = os.pipe()
  server = os.fork()
  if server == 0:
    os.close(read_end)
    server_pid = os.getpid()
    node = os.fork()
    if node == 0:
      time.sleep(0.5)
      node_forkserver._die_with_parent(server_pid)
      os.write(write_end, b'ran on')
      os._exit(0)
    if server_waits:
      os.waitpid(node, 0)
    os._exit(0)
  os.close(write_end)
  os.waitpid(server, 0)
  ready, _, _ = select.select([read_end], [], [], 30)
  assert ready, 'the node neither wrote nor exited'
  with os.fdopen(read_end, 'rb') as f:
    return f.read()  # Until the node's end closes: it exited.


def test_a_node_forked_just_before_its_server_died_does_not_run_on():
  assert _node_ran_on(server_waits=True) == b'ran on'
  assert _node_ran_on(server_waits=False) == b''
