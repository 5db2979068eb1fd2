"""Entry point of every node process started by the launcher.

Launchpad starts a node as `python .../process_entry.py --data_file=...`,
which unpickles the program, and so imports acme, before any of our code
runs. The supervisor starts `python -m acme_launch.node.entry` with the same
arguments instead: it applies the JAX aliases (compat.py),
applies the node's resource settings (cores, TF's GPU and thread
settings: configure_process below), turns JAX's persistent compilation cache
on, records what the process received, and then hands over to Launchpad's
own entry.
"""

import os
import pdb
import socket
import sys
import traceback

from acme_launch import compat  # noqa: F401  (JAX aliases for acme, before unpickling)
from acme_launch import compilation_cache
from acme_launch import errors
from acme_launch import quiet
from acme_launch.plan import node_env
from acme_launch import layout
from acme_launch.plan import topology

# Environment variables worth recording: what decides devices and threads.
_RECORDED_ENV_PREFIXES = ('CUDA_', 'JAX_', 'XLA_', 'TF_', 'OMP_', node_env.PREFIX)


def _fail(message: str) -> None:
  raise errors.LaunchError(message)


def pin_cores(cores) -> None:
  """Pins every thread of this process to `cores` (none: leaves it be).

  Threads started later inherit it; the ones already running (none should
  be, before TF and XLA start) are pinned one by one.
  """
  if not cores:
    return
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
      _fail(f'cannot pin this process to cores '
            f'{node_env.format_cores(cores)}: {e.strerror}')


def configure_process(settings: node_env.NodeEnv) -> None:
  """Applies the node's cores and TF settings, before TF starts.

  Called by main() below before any node code runs (the planner in
  plan/resources.py only writes them). TF sees no GPU unless the plan's
  tf_gpu asks for one, so it never competes with JAX.
  """
  pin_cores(settings.cpus)
  mode = settings.tf_gpu or 'none'
  intra, inter = settings.tf_intra_op_threads, settings.tf_inter_op_threads
  import tensorflow as tf
  try:
    if mode == 'none':
      tf.config.set_visible_devices([], 'GPU')
    else:
      for gpu in tf.config.list_physical_devices('GPU'):
        if mode == 'growth':
          tf.config.experimental.set_memory_growth(gpu, True)
        else:
          limit_mb = int(mode[len('limit:'):])
          tf.config.set_logical_device_configuration(
              gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit_mb)])
    if intra:
      tf.config.threading.set_intra_op_parallelism_threads(intra)
    if inter:
      tf.config.threading.set_inter_op_parallelism_threads(inter)
  except RuntimeError as e:
    _fail('TF GPU/thread settings must be applied before TensorFlow '
          f'initializes: {" ".join(str(e).split())}')


def _jax_memory_limits(devices) -> list:
  """Bytes each accelerator's allocator may use (None on the CPU)."""
  limits = []
  for device in devices:
    stats = device.memory_stats() if device.platform != 'cpu' else None
    limits.append((stats or {}).get('bytes_limit'))
  return limits


def record_received(settings: node_env.NodeEnv) -> None:
  """Writes nodes/<node>.json: the env, JAX devices and TF devices it got."""
  import jax
  import tensorflow as tf
  devices = jax.devices()
  layout.write_json_atomic(
      os.path.join(layout.nodes_dir(settings.run_dir),
                   topology.file_stem(settings.node) + '.json'),
      {
          'node': settings.node,
          'pid': os.getpid(),
          # The launcher, or with --node_start=fork the fork server.
          'parent_pid': os.getppid(),
          # Where it ran: this host's name, the address its servers listen
          # on (a Ray run's cluster address; loopback otherwise) and, on a
          # Ray cluster, the Ray node it was placed on.
          'host': socket.gethostname(),
          'bind_address': settings.bind_address or 'loopback',
          'server_addresses': list(settings.server_addresses),
          'ray_node_id': settings.ray_node_id,
          'env': {k: v for k, v in sorted(os.environ.items())
                  if k.startswith(_RECORDED_ENV_PREFIXES)},
          # The cores it may run on (pinned by the plan, or the launcher's).
          'cpu_affinity': node_env.format_cores(os.sched_getaffinity(0)),
          'jax_devices': [str(d) for d in devices],
          'jax_device_kinds': [d.device_kind for d in devices],
          'jax_platform': jax.default_backend(),
          # What XLA_PYTHON_CLIENT_MEM_FRACTION gave the allocator, per device.
          'jax_memory_limit_bytes': _jax_memory_limits(devices),
          'tf_visible_devices': [d.name for d in tf.config.get_visible_devices()],
          'tf_visible_gpus': [d.name for d in tf.config.get_visible_devices('GPU')],
          'tf_intra_op_threads': tf.config.threading.get_intra_op_parallelism_threads(),
          'tf_inter_op_threads': tf.config.threading.get_inter_op_parallelism_threads(),
      })


def main() -> None:
  settings = node_env.NodeEnv.from_environ()  # What the launcher handed over.
  configure_process(settings)
  if settings.compilation_cache:
    why = compilation_cache.enable(settings.compilation_cache)
    if why:
      print(f'acme-launch: warning: no compilation cache ({why}); this node '
            'compiles its functions as usual', file=sys.stderr, flush=True)
  node = settings.node
  if settings.run_dir and node:
    record_received(settings)

  from absl import app
  from launchpad.nodes.python import process_entry
  sys.argv[0] = process_entry.__file__
  process_entry._populate_flags()
  entry = process_entry.main
  if settings.pdb:
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
    except Exception:
      traceback.print_exc()
      print(f'acme-launch: post-mortem debugger in {node} (q ends it, and '
            'with it the run)', flush=True)
      pdb.post_mortem(sys.exc_info()[2])
      raise
  return run


if __name__ == '__main__':
  quiet.quiet_third_party()
  main()
