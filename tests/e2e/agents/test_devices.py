"""End-to-end: the IMPALA and R2D2 learners on two virtual CPU devices
(the plan's XLA flag, config.resources.learner.num_devices=2), each to a
tiny budget under local_mp, then resumed on one device from the
checkpoint saved on two, and (IMPALA) on two again from the one saved on
one: the state restored is the one saved, whatever the device count.
Those runs are the agent families' own tiny runs, read once for both
(tests/e2e/test_impala.py and tests/e2e/test_minatar.py, with the helpers
below). A count the agent cannot use is one line and exit 2, with nothing
started. The in-process tests are tests/agents/test_devices.py (the batch
split) and tests/plan/test_resources.py (the plan)."""

import os

from tests.conftest import (node_records, read_json, resumed_to_budget,
                            run_launcher)
from tests.e2e.conftest import learner_checkpoints

TWO = '--config.resources.learner.num_devices=2'
ONE = '--config.resources.learner.num_devices=1'
XLA_FLAG = '--xla_force_host_platform_device_count=2'


def newest_digest(run_dir: str) -> str:
  with open(learner_checkpoints(run_dir)[-1].replace('.index', '.digest')) as f:
    return f.read()


def learner_devices(run_dir: str):
  """The learner process's JAX devices and XLA_FLAGS (nodes/learner_0.json)."""
  record = node_records(run_dir)['learner/0']
  return record['jax_devices'], record['env'].get('XLA_FLAGS', '')


def assert_learner_on(run_dir: str, count: int) -> None:
  """The learner ran on `count` devices, the XLA flag set exactly for 2."""
  devices, flags = learner_devices(run_dir)
  assert len(devices) == count, (devices, flags)
  assert (XLA_FLAG in flags) == (count == 2), (devices, flags)


def resume_on(config, run_dir, tiny, devices_flag, restored, budget) -> dict:
  """Resumes `run_dir` to `budget` with `devices_flag` (and `tiny`, which
  may change other settings too): it reaches it from the state saved (its
  digest, checked), trained on from there; the resumed run's summary."""
  saved = newest_digest(run_dir)
  learner_steps = read_json(os.path.join(run_dir, 'summary.json'))[
      'learner_steps']
  result = run_launcher(f'--config={config}', f'--resume={run_dir}', *tiny,
                        devices_flag, f'--config.max_actor_steps={budget}',
                        timeout=300)
  summary = resumed_to_budget(result, run_dir, restored, budget, learner_steps)
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert restore['digest'] == saved
  return summary


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
