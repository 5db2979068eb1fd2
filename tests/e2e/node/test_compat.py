"""The JAX aliases reach Launchpad's child processes before acme is imported."""

import json
import os
import subprocess
import sys

import launchpad as lp

from acme_launch.program import build as program_lib
from acme_launch.plan import resources
from acme_launch.run.local_mp import launch as local_mp


def test_acme_jax_needs_the_aliases_without_compat():
  # Control: plain JAX 0.4.30 cannot import dm-acme 0.4.0's JAX utilities.
  result = subprocess.run(
      [sys.executable, '-c', 'import acme.jax.utils'],
      capture_output=True, text=True, env={**os.environ, 'JAX_PLATFORMS': 'cpu'},
      check=False)
  assert result.returncode != 0
  assert 'AttributeError' in result.stderr


class _ImportsAcmeJax:
  """A node whose process imports acme.jax.utils and reports on it."""

  def __init__(self, out_path: str):
    self._out_path = out_path

  def run(self):
    import acme.jax.utils
    import jax
    with open(self._out_path, 'w') as f:
      json.dump({'pid': os.getpid(), 'module': acme.jax.utils.__name__,
                 'device_array_alias': jax.numpy.DeviceArray is jax.Array}, f)
    lp.stop()


def test_local_mp_child_imports_acme_jax_utils(tmp_path):
  run_dir = str(tmp_path)
  for sub in ('logs', 'nodes'):
    os.makedirs(os.path.join(run_dir, sub))
  out_path = os.path.join(run_dir, 'child.json')
  program = lp.Program('compat')
  with program.group('probe'):
    program.add_node(lp.CourierNode(_ImportsAcmeJax, out_path))
  plan = resources.ResourcePlan(placements=(resources.NodePlacement(
      node='probe/0', group='actor', label='probe', gpus=(),
      env={'JAX_PLATFORMS': 'cpu', 'CUDA_VISIBLE_DEVICES': ''}),))
  built = program_lib.BuiltProgram(program, {'probe': ['probe/0']})

  outcome = local_mp.Supervisor(run_dir).run_multiprocess(built, plan)

  with open(out_path) as f:
    child = json.load(f)
  assert child['pid'] != os.getpid()
  assert child['module'] == 'acme.jax.utils'
  assert child['device_array_alias'] is True
  # lp.stop() from the child reached the supervisor as a clean stop.
  assert outcome.reason in ('terminated', 'all_nodes_exited')
