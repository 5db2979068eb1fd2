"""End-to-end: real Launchpad programs (Reverb, Acme PPO, MuJoCo) to a small budget."""

import os

import pytest

from acme_launch.stats import spread
from tests.conftest import read_json, run_launcher


SMOKE_BUDGET = 6000
EXPECTED_NODES = ('replay_0', 'counter_0', 'learner_0', 'actor_0',
                  'evaluator_0')


def _assert_trained_to_budget(run_dir: str) -> dict:
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= SMOKE_BUDGET
  assert summary['learner_steps'] > 0
  assert summary['evaluator_episodes'] >= 1
  assert summary['last_eval_return'] is not None
  return summary


@pytest.fixture(scope='module')
def local_mp_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp('runs'))
  result = run_launcher('--config=smoke', f'--workdir={workdir}',
                        '--run_name=mp')
  return result, os.path.join(workdir, 'mp')


def test_local_mp_smoke_reaches_budget_and_exits_zero(local_mp_run):
  result, run_dir = local_mp_run
  assert result.returncode == 0, result.stderr[-3000:]
  summary = _assert_trained_to_budget(run_dir)
  # The printed summary names the figures a user looks for.
  for line in ('actor steps', 'learner steps', 'wall time', 'env steps/s',
               'last eval return', 'final eval return', 'final eval spread'):
    assert line in result.stdout
  # Actors stop at the episode that reaches the budget (100-step episodes).
  assert summary['actor_steps'] < SMOKE_BUDGET + 100


def test_local_mp_final_evaluation_plays_ten_episodes_at_the_budget(local_mp_run):
  _, run_dir = local_mp_run
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert summary['final_eval_episodes'] == final['episodes'] == 10
  assert summary['final_eval_actor_steps'] >= SMOKE_BUDGET
  assert summary['final_eval_return_mean'] == pytest.approx(
      sum(final['returns']) / 10)
  assert final['lengths'] == [100] * 10  # config.env_max_episode_steps.
  # Its spread, from the same episodes.
  returns = sorted(final['returns'])
  assert summary['final_eval_return_min'] == returns[0]
  assert summary['final_eval_return_max'] == returns[-1]
  assert summary['final_eval_return_median'] == pytest.approx(
      (returns[4] + returns[5]) / 2)
  assert summary['final_eval_split'] == spread.split_sentence(
      spread.split(returns))


def _assert_only_launcher_lines(result):
  # Every line is ours: the start line, progress lines, the summary table.
  ours = ('acme-launch:', 'progress:', 'exit reason', 'actor steps',
          'learner steps', 'wall time', 'env steps/s', 'last eval return',
          'final eval return', 'final eval spread', 'final eval split',
          'run directory')
  lines = [l for l in (result.stdout + result.stderr).splitlines() if l.strip()]
  strangers = [l for l in lines if not l.startswith(ours)]
  assert not strangers, strangers[:5]


def test_local_mp_terminal_shows_only_the_launchers_lines(local_mp_run):
  result, _ = local_mp_run
  _assert_only_launcher_lines(result)


def test_local_mp_writes_a_log_file_per_node_in_the_run_dir(local_mp_run):
  _, run_dir = local_mp_run
  for node in EXPECTED_NODES:
    log = os.path.join(run_dir, 'logs', f'{node}.log')
    assert os.path.getsize(log) > 0, node


def test_local_mp_every_node_ran_in_its_own_process_on_cpu(local_mp_run):
  _, run_dir = local_mp_run
  records = [read_json(os.path.join(run_dir, 'nodes', f'{n}.json'))
             for n in EXPECTED_NODES]
  assert len({r['pid'] for r in records}) == len(EXPECTED_NODES)
  for record in records:
    assert record['jax_platform'] == 'cpu'
    assert record['env']['CUDA_VISIBLE_DEVICES'] == ''
    assert record['tf_visible_gpus'] == []


def test_run_dir_records_resolved_config_seeds_and_versions(local_mp_run):
  _, run_dir = local_mp_run
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert config['config']['max_actor_steps'] == SMOKE_BUDGET
  assert config['launch_type'] == 'local_mp'
  assert config['packages']['dm-acme'] == '0.4.0'
  assert config['packages']['dm-launchpad'] == '0.5.0'
  assert config['packages']['dm-reverb'] == '0.7.0'
  seeds = config['node_seeds']
  assert seeds['actor/0'] != seeds['evaluator/0']
  assert os.path.isfile(os.path.join(run_dir, 'checkpoints', 'learner', 'checkpoint'))
  assert os.path.isfile(os.path.join(run_dir, 'checkpoints', 'counter', 'checkpoint'))
  assert os.listdir(os.path.join(run_dir, 'checkpoints', 'replay'))


@pytest.mark.parametrize('launch_type', ['local_mt', 'test_mt'])
def test_thread_launch_types_reach_budget(workdir, launch_type):
  result = run_launcher('--config=smoke', f'--launch_type={launch_type}',
                        f'--workdir={workdir}', '--run_name=mt')
  assert result.returncode == 0, result.stderr[-3000:]
  _assert_trained_to_budget(os.path.join(workdir, 'mt'))
  # Node threads' output (Reverb, Launchpad, absl) is in their log instead.
  _assert_only_launcher_lines(result)
  assert os.path.getsize(os.path.join(workdir, 'mt', 'logs', 'threads.log')) > 0


def test_overrides_reach_the_running_program(workdir):
  result = run_launcher('--config=smoke', '--config.num_actors=2',
                        '--config.max_actor_steps=3000',
                        '--config.env_name=Hopper-v4',
                        f'--workdir={workdir}', '--run_name=ovr')
  run_dir = os.path.join(workdir, 'ovr')
  assert result.returncode == 0, result.stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['actor_steps'] >= 3000
  assert summary['max_actor_steps'] == 3000
  # Two actor processes ran, on Hopper (11-dim observations, not HalfCheetah's 17).
  for i in range(2):
    assert os.path.getsize(os.path.join(run_dir, 'metrics', f'actor_{i}.csv')) > 0
  assert read_json(os.path.join(run_dir, 'config.json'))['config']['env_name'] == 'Hopper-v4'


def test_each_node_process_receives_its_planned_resources(workdir):
  """Per-node placement in real processes: actor/1 gets its own settings."""
  result = run_launcher(
      '--config=smoke', '--config.num_actors=2', '--config.max_actor_steps=3000',
      '--config.resources.node_overrides='
      'actor/1:omp_threads=1;actor/1:intra_op_threads=1',
      f'--workdir={workdir}', '--run_name=placed')
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = os.path.join(workdir, 'placed')
  plan = read_json(os.path.join(run_dir, 'config.json'))['resource_plan']
  labels = {p['node']: p['label'] for p in plan}
  assert labels['actor/0'] != labels['actor/1']  # Split under two labels.
  for placement in plan:
    record = read_json(os.path.join(
        run_dir, 'nodes', placement['node'].replace('/', '_') + '.json'))
    for key, value in placement['env'].items():
      assert record['env'].get(key) == value, (placement['node'], key)
    assert record['jax_platform'] == 'cpu'
    assert record['tf_visible_gpus'] == []
  actor_1 = read_json(os.path.join(run_dir, 'nodes', 'actor_1.json'))
  actor_0 = read_json(os.path.join(run_dir, 'nodes', 'actor_0.json'))
  assert actor_1['env']['OMP_NUM_THREADS'] == '1'
  assert actor_1['tf_intra_op_threads'] == 1
  assert 'OMP_NUM_THREADS' not in actor_0['env']
  assert actor_0['tf_intra_op_threads'] == 0  # TF's default: all cores.


def test_batched_actor_steps_several_environments_to_budget(workdir):
  result = run_launcher('--config=smoke', '--config.envs_per_actor=4',
                        '--config.max_actor_steps=8000',
                        f'--workdir={workdir}', '--run_name=batched')
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = os.path.join(workdir, 'batched')
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['actor_steps'] >= 8000 and summary['learner_steps'] > 0
  # Four environments of 100-step episodes: episodes end four at a time.
  assert summary['actor_episodes'] >= 80
  assert summary['evaluator_episodes'] >= 1
