"""End-to-end: central inference (`config.inference='central'`) under
local_mp, one tiny run per agent kind: each reaches its budget with a final
evaluation. The DQN run also loses its inference node mid-run (the
supervisor restarts it and the actors call it again); it and the R2D2 run
(feed-forward and recurrent) then resume to a larger budget with central
inference still on. IMPALA's and PPO's resumes are checked with per-actor
inference (tests/e2e/test_impala.py; PPO's smoke run in
tests/e2e/test_checkpointing.py and tests/e2e/agents/test_ppo_normalization.py):
the inference node keeps no state of its own to restore. And the plan: the node in --dry_run, and bad input refused before
anything starts. Item-by-item equality with per-actor inference:
tests/program/test_inference.py."""

import csv
import os
import signal


from tests.conftest import (REPO_ROOT, actor_steps, killed_on_exit, node_pids,
                            reached_budget, read_json, resumed_to_budget,
                            run_launcher, start_launcher, wait_for)
from tests.e2e import test_atari_dqn
from tests.e2e.conftest import dry_run_stdout
from tests.e2e import test_atari_r2d2
from tests.e2e import test_impala

CENTRAL = '--config.inference=central'


def _inference_rows(run_dir):
  with open(os.path.join(run_dir, 'metrics', 'inference_0.csv')) as f:
    return list(csv.DictReader(f))


def _run_and_resume(workdir, config, tiny, budget, *, resume_budget=0,
                    kill_inference_at=0, evaluated_during=True):
  """A run of `config` with central inference to `budget` (its inference
  node killed once past `kill_inference_at` actor steps, if not 0), then
  resumed to `resume_budget` if not 0; returns the first run's summary."""
  run_dir = os.path.join(workdir, 'central')
  args = (f'--config={config}', f'--workdir={workdir}', '--run_name=central',
          CENTRAL, *tiny, f'--config.max_actor_steps={budget}')
  if kill_inference_at:
    launcher = start_launcher(*args)
    with killed_on_exit(launcher):
      wait_for(lambda: actor_steps(run_dir) >= kill_inference_at, 240,
               'actor steps')
      first_pid = node_pids(run_dir)['inference/0']
      os.kill(first_pid, signal.SIGKILL)
      stdout, stderr = launcher.communicate(timeout=300)
    result = type('Result', (), {'returncode': launcher.returncode,
                                 'stdout': stdout, 'stderr': stderr})
  else:
    result = run_launcher(*args, timeout=300)
  summary = reached_budget(result, run_dir, budget, evaluated_during)
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == summary['final_eval_episodes'] >= 1
  if kill_inference_at:
    assert summary['node_restarts'] == {'inference/0': 1}
    assert node_pids(run_dir)['inference/0'] != first_pid
    assert 'inference/0' in result.stdout and 'restarting it' in result.stdout
  rows = _inference_rows(run_dir)
  assert rows and float(rows[-1]['mean_batch_calls']) >= 1.0
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['config']['inference'] == 'central'
  if not resume_budget:
    return summary
  resumed = run_launcher(f'--resume={run_dir}',
                         f'--config.max_actor_steps={resume_budget}',
                         timeout=300)
  resumed_to_budget(resumed, run_dir, budget, resume_budget,
                    summary['learner_steps'])
  return summary


def test_dqn_atari_loses_its_inference_node_reaches_its_budget_and_resumes(
    workdir):
  # Two actors of two games (four Ape-X epsilons), the node killed once.
  _run_and_resume(workdir, 'dqn_atari', test_atari_dqn.TINY, 1500,
                  resume_budget=2000, kill_inference_at=300)


def test_r2d2_atari_reaches_its_budget_and_resumes(workdir):
  # Two actors (the node steps both games' LSTM states and epsilons).
  _run_and_resume(workdir, 'r2d2_atari',
                  test_atari_r2d2.TINY + ('--config.num_actors=2',), 300,
                  resume_budget=500)


def test_impala_atari_reaches_its_budget(workdir):
  # Two actors; the config's Atari games with a tiny conv torso.
  tiny = test_impala.TINY + (
      '--config.num_actors=2', '--config.network.torso=conv',
      '--config.network.conv_kernels=(8,)',
      '--config.network.conv_strides=(8,)')
  _run_and_resume(workdir, 'impala_atari', tiny, 300)


def test_ppo_mujoco_reaches_its_budget(workdir):
  # Two actors of EnvPool's async mode (16 of 32 environments a step):
  # each call's rows are any 16 of its actor's 32.
  tiny = ('--config.num_actors=2', '--config.eval_every_steps=2000',
          '--config.final_eval_episodes=2', '--config.log_every_seconds=1',
          '--config.env_max_episode_steps=100', '--config.ppo.batch_size=8',
          '--config.ppo.num_minibatches=2', '--config.ppo.num_epochs=1',
          '--config.network.policy_layers=(16,16)',
          '--config.network.value_layers=(16,16)')
  _run_and_resume(workdir, 'ppo_mujoco', tiny, 4000)


def test_dry_run_shows_the_inference_node_with_its_cores_and_gpu(cli_module,
                                                                workdir):
  # In process; the launcher's own --dry_run with this inventory: the next
  # test.
  inventory = os.path.join(REPO_ROOT, 'tests', 'inventories', 'h100x1.json')
  lines = dry_run_stdout(cli_module, '--config=r2d2_atari', CENTRAL,
                          f'--gpu_inventory={inventory}',
                          '--config.r2d2.max_replay_size=20000').splitlines()
  placement = lines[lines.index('resource placement:'):]
  row = next(l for l in placement if l.startswith('inference/0 '))
  # label, cores (not pinned on a small host), its GPU, JAX's fraction.
  assert row.split()[1:6] == ['inference', 'any', '0', '0.1', '8656']
  assert any(l.startswith('  GPU 0 NVIDIA H100 80GB HBM3: ') and
             l.endswith('(learner/0, inference/0)') for l in lines), lines
  assert any(l.startswith('  inference (inference/0): ') and
             'CUDA_VISIBLE_DEVICES=0' in l for l in lines)
  assert os.listdir(workdir) == []


def _one_error_line(result) -> str:
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith('acme-launch: error: '), (
      result.stderr)
  return lines[0]


def test_an_inference_node_that_does_not_fit_the_gpu_is_one_line_exit_2(
    workdir):
  result = run_launcher('--config=r2d2_atari', CENTRAL,
                        '--gpu_inventory=tests/inventories/h100x1.json',
                        '--config.resources.inference.jax_mem_fraction=0.3',
                        f'--workdir={workdir}', '--dry_run', timeout=120)
  line = _one_error_line(result)
  assert 'is over-committed: learner/0 61669 + inference/0 24968' in line
  assert os.listdir(workdir) == []


def test_a_bad_inference_choice_is_one_line_exit_2(workdir):
  result = run_launcher('--config=dqn_atari', '--config.inference=gpu',
                        f'--workdir={workdir}', timeout=120)
  line = _one_error_line(result)
  assert "config.inference must be one of actor, central, got 'gpu'" in line
  assert os.listdir(workdir) == []
