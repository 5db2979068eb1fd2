"""CPU placement in real launches on this machine's cores: each node's record
(nodes/<node>.json: the affinity its process reports, and its thread
settings) says what it got (the planner on made-up hosts:
tests/plan/test_cpu_placement.py).
"""

import os
import subprocess
import sys

import pytest

from acme_launch import errors
from acme_launch.plan import gpu_inventory
from acme_launch.plan import node_env
from tests.conftest import REPO_ROOT, node_records, read_json, run_launcher, user_env


def test_a_launcher_sees_only_its_own_cuda_visible_devices(tmp_path):
  inventory_file = os.path.join(REPO_ROOT, 'tests', 'inventories', 'h100x8.json')
  gpus = gpu_inventory.read_inventory(inventory_file)
  assert [g.index for g in gpu_inventory.visible_to_launcher(gpus, '2,5')] == [2, 5]
  assert gpu_inventory.visible_to_launcher(gpus, '') == ()
  assert gpu_inventory.visible_to_launcher(gpus, None) == gpus
  with pytest.raises(errors.LaunchError, match='GPU indices'):
    gpu_inventory.visible_to_launcher(gpus, 'GPU-5f2e')
  # The dry run of a launcher given GPUs 6,7 plans the learner on GPU 6.
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), '--config=smoke',
       '--dry_run', f'--gpu_inventory={inventory_file}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
      env=user_env({'CUDA_VISIBLE_DEVICES': '6,7'}), check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'GPU 6 NVIDIA H100 80GB HBM3' in result.stdout, result.stdout
  assert 'idle GPUs: 7 (' in result.stdout, result.stdout


def test_pinned_nodes_run_on_their_cores_with_threads_to_match(workdir):
  """A real run pinned by core lists (two cores here, so oversubscribed)."""
  result = run_launcher(
      '--config=smoke', '--config.max_actor_steps=2000',
      '--config.resources.learner.cpus=0-0', '--config.resources.actor.cpus=1-1',
      '--config.resources.replay.cpus=1-1', '--config.resources.counter.cpus=0-1',
      '--config.resources.evaluator.cpus=all',
      '--config.resources.oversubscribe_cpus=true',
      f'--workdir={workdir}', '--run_name=pinned')
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = os.path.join(workdir, 'pinned')
  plan_rows = {p['node']: p for p in
               read_json(os.path.join(run_dir, 'config.json'))['resource_plan']}
  records = node_records(run_dir)
  launcher_cores = node_env.format_cores(os.sched_getaffinity(0))
  expected = {'learner/0': '0', 'actor/0': '1', 'replay/0': '1',
              'counter/0': '0-1', 'evaluator/0': launcher_cores}
  for node, affinity in expected.items():
    assert records[node]['cpu_affinity'] == affinity, node
    planned = plan_rows[node]['cores']
    assert node_env.format_cores(planned) == (affinity if planned else '')
  assert records['learner/0']['tf_intra_op_threads'] == 1
  assert records['learner/0']['env']['OMP_NUM_THREADS'] == '1'
  assert records['counter/0']['tf_inter_op_threads'] == 2
  assert records['evaluator/0']['tf_intra_op_threads'] == 0  # Not pinned.
  assert read_json(os.path.join(run_dir, 'summary.json'))['exit_reason'] == (
      'budget_reached')


def test_a_launcher_given_one_core_plans_within_it(workdir):
  """What a sweep does: the launcher's affinity is the host it plans on."""
  command = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
             '--config=smoke', '--config.max_actor_steps=2000',
             '--config.resources.actor.cpus=1-1',
             f'--workdir={workdir}', '--run_name=slice']
  refused = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=300, env=user_env(), check=False,
                           preexec_fn=lambda: os.sched_setaffinity(0, {0}))
  assert refused.returncode == 2
  lines = [l for l in refused.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and 'may use cores 0' in lines[0], lines
  assert not os.path.exists(os.path.join(workdir, 'slice'))
  command[-3] = '--config.resources.actor.cpus=0-0'
  result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, env=user_env(), check=False,
                          preexec_fn=lambda: os.sched_setaffinity(0, {0}))
  assert result.returncode == 0, result.stderr[-3000:]
  records = node_records(os.path.join(workdir, 'slice'))
  assert {r['cpu_affinity'] for r in records.values()} == {'0'}
