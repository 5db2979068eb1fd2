"""Entry point of every node process started by the launcher.

Launchpad starts a node as `python .../process_entry.py --data_file=...`,
which unpickles the program, and so imports acme, before any of our code
runs. The supervisor starts `python -m acme_launch.node.entry` with the same
arguments instead: it applies the JAX aliases (compat.py),
applies the node's resource settings (cores, TF's GPU and thread
settings: configure_process below), records what the process received, and
then hands over to Launchpad's own entry.
"""

import os
import pdb
import socket
import sys
import traceback

from acme_launch import compat  # noqa: F401  (JAX aliases for acme, before unpickling)
from acme_launch import errors
from acme_launch import quiet
from acme_launch.plan import resources
from acme_launch import layout
from acme_launch.plan import topology

# Environment variables worth recording: what decides devices and threads.
_RECORDED_ENV_PREFIXES = ('CUDA_', 'JAX_', 'XLA_', 'TF_', 'OMP_', 'ACME_LAUNCH_')


def _fail(message: str) -> None:
  raise errors.LaunchError(message)


def _env_int(name: str) -> int:
  text = os.environ.get(name, '0') or '0'
  if not text.isdigit():
    _fail(f'{name} must be a non-negative integer, got {text!r}')
  return int(text)


def pin_cores(text: str) -> None:
  """Pins every thread of this process to the cores in `text` ('0-3,8').

  Threads started later inherit it; the ones already running (none should
  be, before TF and XLA start) are pinned one by one.
  """
  if not text:
    return
  try:
    cores = resources.parse_core_list(text)
  except ValueError:
    _fail(f"{resources.CPUS_ENV} must be a core list like '0-3,8', "
          f'got {text!r}')
  try:
    threads = [int(t) for t in os.listdir('/proc/self/task')]
  except OSError:
    threads = [0]
  for thread in threads:
    try:
      os.sched_setaffinity(thread, cores)
    except ProcessLookupError:
      pass  # That thread ended meanwhile.
    except OSError as e:
      _fail(f'cannot pin this process to cores {text}: {e.strerror}')


def configure_process() -> None:
  """Applies the node's cores and TF settings from its env, before TF starts.

  Called by main() below before any node code runs (the planner in
  plan/resources.py only writes the env). TF sees no GPU unless
  ACME_LAUNCH_TF_GPU asks for one, so it never competes with JAX.
  """
  pin_cores(os.environ.get(resources.CPUS_ENV, ''))
  mode, limit_mb = resources.parse_tf_gpu(
      os.environ.get(resources.TF_GPU_ENV) or 'none', resources.TF_GPU_ENV)
  intra = _env_int(resources.TF_INTRA_OP_ENV)
  inter = _env_int(resources.TF_INTER_OP_ENV)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    if mode == 'none':
      tf.config.set_visible_devices([], 'GPU')
    else:
      for gpu in tf.config.list_physical_devices('GPU'):
        if mode == 'growth':
          tf.config.experimental.set_memory_growth(gpu, True)
        else:
          tf.config.set_logical_device_configuration(
              gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit_mb)])
    if intra:
      tf.config.threading.set_intra_op_parallelism_threads(intra)
    if inter:
      tf.config.threading.set_inter_op_parallelism_threads(inter)
  except RuntimeError as e:
    _fail('TF GPU/thread settings must be applied before TensorFlow '
          f'initializes: {" ".join(str(e).split())}')


def record_received(run_dir: str, node: str) -> None:
  """Writes nodes/<node>.json: the env, JAX devices and TF devices it got."""
  import jax  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  layout.write_json_atomic(
      os.path.join(layout.nodes_dir(run_dir), topology.file_stem(node) + '.json'),
      {
          'node': node,
          'pid': os.getpid(),
          # Where it ran: this host's name, the address its servers listen
          # on (a Ray run's cluster address; loopback otherwise) and, on a
          # Ray cluster, the Ray node it was placed on.
          'host': socket.gethostname(),
          'bind_address': os.environ.get('ACME_LAUNCH_BIND_ADDRESS') or 'loopback',
          'server_addresses': [a for a in os.environ.get(
              'ACME_LAUNCH_SERVER_ADDRESSES', '').split(',') if a],
          'ray_node_id': os.environ.get('ACME_LAUNCH_RAY_NODE_ID', ''),
          'env': {k: v for k, v in sorted(os.environ.items())
                  if k.startswith(_RECORDED_ENV_PREFIXES)},
          # The cores it may run on (pinned by the plan, or the launcher's).
          'cpu_affinity': resources.format_cores(os.sched_getaffinity(0)),
          'jax_devices': [str(d) for d in jax.devices()],
          'jax_platform': jax.default_backend(),
          'tf_visible_devices': [d.name for d in tf.config.get_visible_devices()],
          'tf_visible_gpus': [d.name for d in tf.config.get_visible_devices('GPU')],
          'tf_intra_op_threads': tf.config.threading.get_intra_op_parallelism_threads(),
          'tf_inter_op_threads': tf.config.threading.get_inter_op_parallelism_threads(),
      })


def main() -> None:
  configure_process()
  run_dir = os.environ.get('ACME_LAUNCH_RUN_DIR')
  node = os.environ.get('ACME_LAUNCH_NODE')
  if run_dir and node:
    record_received(run_dir, node)

  from absl import app  # pylint: disable=g-import-not-at-top
  from launchpad.nodes.python import process_entry  # pylint: disable=g-import-not-at-top
  sys.argv[0] = process_entry.__file__
  process_entry._populate_flags()  # pylint: disable=protected-access
  entry = process_entry.main
  if os.environ.get('ACME_LAUNCH_PDB') == '1':
    entry = _with_post_mortem(entry, node or 'this node')
  app.run(entry)


def _with_post_mortem(entry, node: str):
  """--debug_node with --pdb: a debugger at the frame that raised.

  absl's own --pdb_post_mortem only opens one when stdout is a terminal;
  this one opens whatever stdin is, so a debugger session can be scripted.
  """
  def run(argv):
    try:
      return entry(argv)
    except Exception:  # pylint: disable=broad-except
      traceback.print_exc()
      print(f'acme-launch: post-mortem debugger in {node} (q ends it, and '
            'with it the run)', flush=True)
      pdb.post_mortem(sys.exc_info()[2])
      raise
  return run


if __name__ == '__main__':
  quiet.quiet_third_party()
  main()
