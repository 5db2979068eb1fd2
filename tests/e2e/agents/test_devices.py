"""End-to-end: the IMPALA and R2D2 learners on two virtual CPU devices
(the plan's XLA flag, config.resources.learner.num_devices=2), each to a
tiny budget under local_mp, then resumed on one device from the
checkpoint saved on two, and (IMPALA) on two again from the one saved on
one: the state restored is the one saved, whatever the device count. A
count the agent cannot use is one line and exit 2, with nothing started.
The in-process tests are tests/agents/test_devices.py (the batch split)
and tests/plan/test_resources.py (the plan)."""

import os

from tests.conftest import (node_records, reached_budget, read_json,
                            resumed_to_budget, run_launcher)
from tests.e2e import test_impala
from tests.e2e.conftest import learner_checkpoints
from tests.e2e.test_minatar import TINY as R2D2_TINY

TWO = '--config.resources.learner.num_devices=2'
ONE = '--config.resources.learner.num_devices=1'
XLA_FLAG = '--xla_force_host_platform_device_count=2'


def _newest_digest(run_dir: str) -> str:
  with open(learner_checkpoints(run_dir)[-1].replace('.index', '.digest')) as f:
    return f.read()


def _learner_devices(run_dir: str):
  """The learner process's JAX devices and XLA_FLAGS (nodes/learner_0.json)."""
  record = node_records(run_dir)['learner/0']
  return record['jax_devices'], record['env'].get('XLA_FLAGS', '')


def _resume_on(config, run_dir, tiny, devices_flag, restored, budget):
  """Resumes `run_dir` to `budget` with `devices_flag`: it reaches it from
  the state saved (its digest, checked), trained on from there."""
  saved = _newest_digest(run_dir)
  learner_steps = read_json(os.path.join(run_dir, 'summary.json'))[
      'learner_steps']
  result = run_launcher(f'--config={config}', f'--resume={run_dir}', *tiny,
                        devices_flag, f'--config.max_actor_steps={budget}',
                        timeout=300)
  resumed_to_budget(result, run_dir, restored, budget, learner_steps)
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert restore['digest'] == saved


def test_impala_learns_on_two_devices_and_resumes_on_one_and_two(workdir):
  budget = test_impala.BUDGET
  tiny = (*test_impala.TINY, '--config.envs_per_actor=1')  # Batch 2: 1 each.
  result = run_launcher('--config=impala_minatar', f'--workdir={workdir}',
                        '--run_name=two', *tiny, TWO,
                        f'--config.max_actor_steps={budget}', timeout=300)
  run_dir = os.path.join(workdir, 'two')
  reached_budget(result, run_dir, budget)
  devices, flags = _learner_devices(run_dir)
  assert len(devices) == 2 and XLA_FLAG in flags, (devices, flags)
  assert len(node_records(run_dir)['actor/0']['jax_devices']) == 1

  _resume_on('impala_minatar', run_dir, tiny, ONE, budget, 2 * budget)
  devices, flags = _learner_devices(run_dir)
  assert len(devices) == 1 and XLA_FLAG not in flags, (devices, flags)

  _resume_on('impala_minatar', run_dir, tiny, TWO, 2 * budget, 3 * budget)
  assert len(_learner_devices(run_dir)[0]) == 2


def test_r2d2_learns_on_two_devices_and_resumes_on_one(workdir):
  budget = 400
  result = run_launcher('--config=r2d2_minatar', f'--workdir={workdir}',
                        '--run_name=two', *R2D2_TINY, TWO,
                        f'--config.max_actor_steps={budget}', timeout=300)
  run_dir = os.path.join(workdir, 'two')
  reached_budget(result, run_dir, budget)
  devices, flags = _learner_devices(run_dir)
  assert len(devices) == 2 and XLA_FLAG in flags, (devices, flags)

  _resume_on('r2d2_minatar', run_dir, R2D2_TINY, ONE, budget, 2 * budget)
  assert len(_learner_devices(run_dir)[0]) == 1


def test_a_device_count_the_agent_cannot_use_is_one_line_exit_2(workdir):
  result = run_launcher('--config=smoke', f'--workdir={workdir}', TWO,
                        timeout=120)
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [line for line in result.stderr.splitlines()
           if line.startswith('acme-launch: error:')]
  assert lines == [
      'acme-launch: error: config.resources.learner.num_devices=2: agent '
      "ppo's learner runs on 1 device (its adapter's learner_devices; the "
      'shipped impala and r2d2 take any number)'], result.stderr
  assert os.listdir(workdir) == []
