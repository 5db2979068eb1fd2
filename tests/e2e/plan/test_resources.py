"""Resource planner meets this machine: the nvidia-smi fallback, a node process
configured from its plan (GPUs hidden from TF, threads), and GPUs this jaxlib
cannot open. Each starts a process; the plans themselves are
tests/plan/test_resources.py's, whose injected inventories these reuse.
"""

import json
import os
import subprocess
import sys
import textwrap

from acme_launch.plan import gpu_inventory
from tests.conftest import REPO_ROOT
from tests.plan.test_resources import inventory, plan


def test_nvidia_smi_fallback_when_nvml_is_unusable(monkeypatch):
  import pynvml

  def no_driver():
    raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

  def fake_smi(argv, **kwargs):
    del kwargs
    assert argv[:2] == ['nvidia-smi', '--query-gpu=index,name,memory.total']
    return subprocess.CompletedProcess(argv, 0, stdout=(
        '0, NVIDIA GeForce RTX 3080, 10240\n'
        '1, NVIDIA GeForce RTX 3080 Ti, 12288\n'), stderr='')

  monkeypatch.setattr(pynvml, 'nvmlInit', no_driver)
  monkeypatch.setattr(gpu_inventory.subprocess, 'run', fake_smi)
  assert gpu_inventory.read_inventory() == inventory('rtx3080_3080ti')

  def missing_smi(argv, **kwargs):
    raise FileNotFoundError(argv[0])

  monkeypatch.setattr(gpu_inventory.subprocess, 'run', missing_smi)
  assert gpu_inventory.read_inventory() == ()


def _run_node_process(env, code):
  """Runs `code` after configure_process() in a fresh interpreter."""
  script = textwrap.dedent('''
      import json
      import os
      from acme_launch.node import entry as node_entry
      from acme_launch.plan import node_env
      node_entry.configure_process(node_env.NodeEnv.from_environ(os.environ))
  ''') + textwrap.dedent(code)
  base = {k: v for k, v in os.environ.items()
          if not k.startswith(('ACME_LAUNCH_', 'CUDA_', 'JAX_', 'XLA_', 'OMP_'))}
  return subprocess.run([sys.executable, '-c', script], cwd=REPO_ROOT,
                        env={**base, **env}, capture_output=True, text=True,
                        timeout=120, check=False)


def test_configure_process_hides_gpus_from_tf_and_sets_threads():
  p = plan('h100x8', node_overrides=(
      'actor/0:intra_op_threads=3;actor/0:inter_op_threads=2;'
      'actor/0:omp_threads=1'))
  env = dict(p.placement('actor/0').env)
  assert env['CUDA_VISIBLE_DEVICES'] == '' and env['JAX_PLATFORMS'] == 'cpu'
  result = _run_node_process(env, '''
      import os
      import jax
      import tensorflow as tf
      tf.constant(1.0)  # TF's context starts with the settings applied.
      print(json.dumps({
          'tf_gpus': tf.config.get_visible_devices('GPU'),
          'intra': tf.config.threading.get_intra_op_parallelism_threads(),
          'inter': tf.config.threading.get_inter_op_parallelism_threads(),
          'omp': os.environ['OMP_NUM_THREADS'],
          'jax_platform': jax.default_backend(),
      }))
  ''')
  assert result.returncode == 0, result.stderr[-2000:]
  got = json.loads(result.stdout.strip().splitlines()[-1])
  assert got == {'tf_gpus': [], 'intra': 3, 'inter': 2, 'omp': '1',
                 'jax_platform': 'cpu'}


def test_configure_process_after_tf_started_is_a_clear_error():
  script = textwrap.dedent('''
      import tensorflow as tf
      tf.constant(1.0)
      from acme_launch import errors
      from acme_launch.node import entry as node_entry
      from acme_launch.plan import node_env
      try:
        node_entry.configure_process(
            node_env.NodeEnv(tf_gpu='none', tf_intra_op_threads=2))
      except errors.LaunchError as e:
        print('LaunchError:', e)
  ''')
  result = subprocess.run(
      [sys.executable, '-c', script], cwd=REPO_ROOT, capture_output=True,
      text=True, timeout=120, check=False,
      env={**os.environ, 'CUDA_VISIBLE_DEVICES': '', 'JAX_PLATFORMS': 'cpu',
           'ACME_LAUNCH_TF_INTRA_OP_THREADS': '2'})
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'LaunchError: TF GPU/thread settings must be applied before' in (
      result.stdout)


def test_gpus_this_jaxlib_cannot_open_give_a_warning_and_a_cpu_run(workdir):
  # The lock's jaxlib is CPU-only: an 8 x H100 inventory (as nvidia-smi would
  # report on a GPU host set up without ACME_LAUNCH_JAX=cuda12) must not put
  # the learner on a GPU it would die opening.
  from tests.conftest import read_json, run_launcher
  result = run_launcher('--config=smoke', '--config.max_actor_steps=2000',
                        '--gpu_inventory=tests/inventories/h100x8.json',
                        f'--workdir={workdir}', '--run_name=gpu')
  assert result.returncode == 0, result.stderr[-3000:]
  warnings = [l for l in result.stderr.splitlines() if 'warning:' in l]
  assert len(warnings) == 1, result.stderr[-2000:]
  assert 'cannot open the GPUs' in warnings[0]
  assert 'ACME_LAUNCH_JAX=cuda12' in warnings[0]
  run_dir = os.path.join(workdir, 'gpu')
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  for name in os.listdir(os.path.join(run_dir, 'nodes')):
    record = read_json(os.path.join(run_dir, 'nodes', name))
    if 'jax_platform' in record:
      assert record['jax_platform'] == 'cpu', name
      assert record['env']['CUDA_VISIBLE_DEVICES'] == '', name
