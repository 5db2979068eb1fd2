"""Every bench/ script, run tiny: none can break unnoticed (bench/cluster.py
in test_bench_cluster.py, with the other namespace-cluster tests).

Each runs as a user runs it (its own process, real programs) with small
budgets; the assertions read the JSON each script writes next to its table.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys

import pytest

from acme_launch.testing.launcher import checkout_on_path
from tests.conftest import REPO_ROOT, read_json, user_env



def _bench(script: str, *args: str, timeout: float = 300):
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'bench', script), *args],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
      env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  return result


def test_throughput_measures_stock_acme_and_acme_launch(tmp_path):
  # Enough steps for several progress rows (a second apart) as counts
  # move: actors count 2,000 steps a pair of episodes, a few thousand a
  # second on a loaded 2-core host.
  _bench('throughput.py', '--seconds=5', '--warmup=0', '--steps=16000',
         '--ceiling_seconds=1', '--cells=1x2',
         '--backends=envpool,envpool_async', f'--out={tmp_path}')
  results = read_json(os.path.join(tmp_path, 'throughput.json'))
  assert results['ceilings']['gym'] > 0 and results['ceilings']['envpool'] > 0
  assert [(r['backend'], r['actors'], r['envs_per_actor'])
          for r in results['acme_launch']] == [('envpool', 1, 2),
                                               ('envpool_async', 1, 2)]
  rates = ([r['env_steps_per_second'] for r in results['stock_acme']] +
           [r['env_steps_per_second'] for r in results['acme_launch']])
  assert len(rates) == 3 and all(r and r > 0 for r in rates), results
  # The async program really ran EnvPool's async mode: 4 envs, 2 a step.
  config = read_json(os.path.join(tmp_path, 'throughput',
                                  'acme_launch_envpool_async_a1_e2',
                                  'config.json'))
  assert config['config']['envpool_async_envs'] == 4, config['config']


def test_scaling_measures_pinned_unpinned_stock_and_a_packed_sweep(tmp_path):
  _bench('scaling.py', '--actors=1', '--envs_per_actor=2', '--seconds=5',
         '--warmup=0', '--steps=8000', '--sweep_points=1',
         '--sweep_steps=1000', f'--out={tmp_path}', timeout=900)
  results = read_json(os.path.join(tmp_path, 'scaling.json'))
  [row] = results['actors']
  assert row['actors'] == 1
  # One actor pins with 3 cores (learner, replay, actor). Two cores here:
  # then the small-host plan (the actor on a core of its own) is measured.
  assert row['auto_pinned'] is (results['cores'] >= 3)
  measured = ['stock_acme', 'auto', 'unpinned']
  if not row['auto_pinned']:
    measured.append('small_host_pinned')
  for key in measured:
    assert row[key] and row[key] > 0, (key, results)
  if not row['auto_pinned']:  # The same placement: measured once.
    assert row['unpinned'] == row['auto']
  # One point: the packed sweep is the serial one, measured once.
  assert results['sweep']['packed'] == results['sweep']['serial']
  assert results['sweep']['serial']['concurrent'] == 1
  assert results['sweep']['serial']['programs_per_hour'] > 0, results


def test_learning_matrix_runs_each_cell_once_and_resumes_cell_by_cell(tmp_path):
  args = ('--configs=smoke', '--envs=HalfCheetah-v4', '--steps=2000',
          '--seeds=0', f'--out={tmp_path}')
  first = _bench('learning.py', *args)
  assert 'one seed in a cell: no interval can be given for it' in first.stdout
  results = read_json(os.path.join(tmp_path, 'learning.json'))
  [cell] = results['cells']
  assert (cell['config'], cell['env'], cell['steps']) == ('smoke', 'HalfCheetah-v4', 2000)
  [run] = cell['runs']
  assert run['exit_reason'] == 'budget_reached' and run['actor_steps'] >= 2000
  assert cell['final_return_mean'] == run['final_eval_return_mean'] is not None
  assert cell['learner_steps_per_second'] == pytest.approx(
      run['learner_steps'] / run['wall_time_seconds'])
  assert cell['learner_steps_per_second'] > 0
  assert os.path.getsize(results['plots']['HalfCheetah-v4']) > 0
  assert run['curve'][-1] == [run['final_eval_actor_steps'],
                              run['final_eval_return_mean']]
  # Every final episode's return, not only their mean.
  assert len(run['final_eval_returns']) == 10
  assert sum(run['final_eval_returns']) / 10 == pytest.approx(
      run['final_eval_return_mean'])
  # bench/replay_final_eval.py on this run's directory: its saved policy
  # through the final evaluation's path and Acme's loop, 10 episodes each.
  run_dir = os.path.join(tmp_path, 'learning', 'smoke', 'HalfCheetah-v4',
                         'seed0')
  replay = _bench('replay_final_eval.py', run_dir,
                  '--paths=batched,loop').stdout.splitlines()
  for path in ('recorded', 'batched', 'loop'):
    [line] = [l for l in replay if l.split()[:1] == [path]]
    assert line.split()[2].endswith('/10'), line
  # --poses: each of the 10 episodes again, one environment at a time, and
  # for each that stood still its pose, action and standard deviations.
  poses = [l for l in _bench('replay_final_eval.py', run_dir, '--poses')
           .stdout.splitlines() if l.startswith('seed ')]
  assert len(poses) == 10, poses
  for line in poses:
    assert ' return ' in line, line
    if 'still from step' in line:
      assert re.search(r'rooty -?\d+\.\d\d fthigh .*; action \[.*\]; std '
                       r'\[.*\]; first 200 steps std \[', line), line
  # Run again: the finished cell is read back, not run.
  again = _bench('learning.py', *args)
  assert 'finished before' in again.stdout and 'running:' not in again.stdout

  # Merged with another seed's matrix, once the run directories are gone:
  # the JSON alone makes the pooled table and plot.
  shutil.copy(os.path.join(tmp_path, 'learning.json'),
              os.path.join(tmp_path, 'seed0.json'))
  # Seed 1's evaluations in the second half of the budget (from 1,000
  # steps on; not the final one): 4.0 and 8.0.
  other_curve = [[0, 0.0], [600, 2.0], [1000, 4.0], [1500, 8.0],
                 run['curve'][-1]]
  other = {**results, 'cells': [{**cell, 'runs': [
      {**run, 'seed': 1, 'curve': other_curve}]}]}
  with open(os.path.join(tmp_path, 'seed1.json'), 'w') as f:
    json.dump(other, f)
  shutil.rmtree(os.path.join(tmp_path, 'learning'))
  merged_out = os.path.join(tmp_path, 'merged')
  result = _bench('learning.py', '--merge=' + ','.join(
      os.path.join(tmp_path, f'seed{s}.json') for s in (0, 1)),
                  '--name=pooled', f'--out={merged_out}')
  assert 'smoke HalfCheetah-v4 seed 1: ' in result.stdout
  assert '4.0 to 8.0, mean 6.0' in result.stdout
  pooled = read_json(os.path.join(merged_out, 'pooled.json'))
  [cell] = pooled['cells']
  assert cell['seeds'] == [0, 1]
  assert cell['final_returns'] == [run['final_eval_return_mean']] * 2
  # Two equal seeds: every estimate and its interval is that return.
  final = run['final_eval_return_mean']
  assert cell['final_return_intervals']['iqm'] == {
      'value': final, 'low': final, 'high': final}
  assert 'final return IQM, median, mean over seeds' in result.stdout

  # Two configs on one task: the probability that one's run ends above the
  # other's (here another config's two seeds, both above).
  renamed = {**results, 'cells': [{**cell, 'config': 'better', 'runs': [
      {**run, 'seed': s, 'final_eval_return_mean': final + 100}
      for s in (0, 1)]}]}
  with open(os.path.join(tmp_path, 'better.json'), 'w') as f:
    json.dump(renamed, f)
  result = _bench('learning.py', '--merge=' + ','.join(
      os.path.join(tmp_path, f) for f in ('seed0.json', 'seed1.json',
                                          'better.json')),
                  '--name=two_configs', f'--out={merged_out}')
  assert ('HalfCheetah-v4: P(smoke > better) = 0.00 [0.00, 0.00]'
          in result.stdout)
  assert os.path.getsize(pooled['plots']['HalfCheetah-v4']) > 0


def test_learning_refuses_an_unknown_config_or_task_before_running(tmp_path):
  for bad in ('--configs=no_such_config', '--envs=NoSuchTask-v9',
              f'--merge={tmp_path}/no_such_matrix.json'):
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, 'bench', 'learning.py'),
         '--configs=smoke', bad, f'--out={tmp_path}'],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env=checkout_on_path(dict(os.environ)), check=False)
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and 'error' in lines[0], lines
    assert not os.path.exists(os.path.join(tmp_path, 'learning'))


def test_accept_measures_connections_without_and_with_the_shims_lookups(tmp_path):
  result = _bench('accept.py', '--connections=50', '--rounds=1', f'--out={tmp_path}')
  figures = read_json(os.path.join(tmp_path, 'accept.json'))['microseconds']
  assert set(figures) == {'none', 'sock_diag', 'proc'}
  assert all(len(v) == 1 and v[0] > 0 for v in figures.values()), figures
  assert 'sock_diag' in result.stdout


def test_startup_reports_cold_and_warm_first_steps_and_memory(tmp_path):
  _bench('startup.py', '--config=smoke', f'--out={tmp_path}')
  results = read_json(os.path.join(tmp_path, 'startup.json'))['node_start']['fork']
  for run in ('cold', 'warm'):
    assert 0 < results[run]['first_actor_step_seconds'] < 300
    assert 0 < results[run]['first_learner_step_seconds'] < 300
  # The cold run filled the cache; the warm one read what it needed there.
  assert results['cold']['cache_entries_written'] > 5
  assert results['cold']['cache_entries_read'] == 0
  assert results['warm']['cache_entries_read'] > 5
  assert {'learner/0', 'actor/0'} <= set(results['warm']['resident_mib'])


# Tiny agents, each learner on its own replay's items: transitions (DQN's
# loss also reads Reverb's sample info: the in-memory batch has it), or R2D2's
# and IMPALA's sequences.
_LEARNERS = {
    'sac_mujoco': (
        '--config.sac.min_replay_size=100', '--config.sac.batch_size=8',
        '--config.network.hidden_layers=(8,8)'),
    'dqn_minatar': (
        '--config.dqn.min_replay_size=10', '--config.dqn.batch_size=2',
        '--config.network.conv_channels=(4,)',
        '--config.network.hidden_layers=(8,)',
        '--config.dqn.samples_per_insert_tolerance_rate=1000'),
    'r2d2_minatar': (
        '--config.r2d2.batch_size=2', '--config.r2d2.min_replay_size=10',
        '--config.r2d2.burn_in_length=2', '--config.r2d2.trace_length=4',
        '--config.r2d2.sequence_period=2', '--config.network.conv_channels=(4,)',
        '--config.network.lstm_size=8', '--config.network.head_hidden_layers=(8,)',
        # The learner never waits for the actor in the window.
        '--config.r2d2.samples_per_insert_tolerance_rate=1000'),
    'impala_minatar': (
        '--config.impala.batch_size=2', '--config.impala.sequence_length=5',
        '--config.impala.max_queue_size=8', '--config.network.conv_channels=(4,)',
        '--config.network.lstm_size=8'),
}


@pytest.mark.parametrize('config_name', ['dqn_minatar', 'impala_minatar',
                                         'r2d2_minatar'])
def test_learner_alone_steps_each_agents_own_batches(tmp_path, config_name):
  # Alone only: the in-a-run side is the same for every agent (the SAC test
  # below measures it).
  result = _bench('learner.py', f'--config={config_name}', '--seconds=1',
                  '--alone_only', f'--out={tmp_path}', '--',
                  *_LEARNERS[config_name])
  results = read_json(os.path.join(tmp_path, 'learner.json'))
  assert results['agent'] == config_name.split('_')[0]
  assert results['alone_sgd_steps_per_second'] > 0
  assert results['jax_device'] == 'cpu'
  assert 'run_sgd_steps_per_second' not in results
  assert 'in a run' not in result.stdout
  assert not os.path.exists(os.path.join(tmp_path, 'learner'))


def test_learner_measures_alone_and_in_a_run_counting_sgd_steps(tmp_path):
  # Acme's SAC learner counts one step per learner step of (here) 2 SGD
  # steps, on a batch twice the size; both sides are reported in SGD steps.
  result = _bench('learner.py', '--config=sac_mujoco', '--seconds=2',
                  '--settle=1', f'--out={tmp_path}', '--',
                  '--config.num_actors=1', '--config.eval_every_steps=100000',
                  '--config.sac.num_sgd_steps_per_step=2',
                  *_LEARNERS['sac_mujoco'])
  results = read_json(os.path.join(tmp_path, 'learner.json'))
  assert results['sgd_steps_per_learner_step'] == 2
  assert results['alone_sgd_steps'] > 0 and results['run_sgd_steps'] > 0
  assert results['alone_sgd_steps'] % 2 == 0
  assert results['run_sgd_steps'] % 2 == 0
  assert results['ratio'] == pytest.approx(
      results['run_sgd_steps_per_second'] /
      results['alone_sgd_steps_per_second'])
  assert 'in a run / alone' in result.stdout
  assert 'actors in the run' in result.stdout
  # Actors count their steps at each episode's end: a 2 s window may hold none.
  assert results['run_actor_steps_per_second'] >= 0


def test_soak_samples_every_node_and_reports_growth(tmp_path):
  result = _bench('soak.py', '--config=smoke', '--minutes=0.5', '--every=1',
                  '--settle_minutes=0.1', f'--out={tmp_path}')
  soak = read_json(os.path.join(tmp_path, 'soak.json'))
  assert {'learner/0', 'actor/0', 'replay/0', 'counter/0'} <= set(soak['nodes'])
  for node in soak['nodes'].values():
    assert node['rss_mib_end'] > 50 and node['fds_end'] > 0
  assert soak['actor_steps_end'] > soak['actor_steps_settled'] >= 0
  assert os.path.getsize(os.path.join(tmp_path, 'soak_rss.png')) > 0
  assert 'largest growth' in result.stdout


def test_actor_loop_measures_the_loop_against_its_ceiling():
  result = _bench('actor_loop.py', '--envs=4', '--seconds=1',
                  '--ceiling_seconds=0.5', '--repeats=1', '--env_threads=2')
  assert 'EnvPool worker threads 2' in result.stdout, result.stdout[-2000:]
  line = [l for l in result.stdout.splitlines() if 'envs a step (sync)' in l]
  assert len(line) == 1, result.stdout[-2000:]
  assert re.search(r'actor [\d,]+ env steps/s; ceiling [\d,]+: \d+%', line[0])


def test_replay_memory_fills_real_servers_and_reports_the_figures(tmp_path):
  # --settle=0.3: tiny tables settle at once (a read 1 s apart is the
  # default's, for large fills).
  _bench('replay_memory.py', '--steps=300', '--checkpoint_items=500',
         '--checkpoint_rounds=2', '--settle=0.3', f'--out={tmp_path}',
         timeout=600)
  results = read_json(os.path.join(tmp_path, 'replay_memory.json'))
  for fill in ('transitions', 'sequences', 'pixels', 'r2d2'):
    assert results[fill]['steps'] >= 300, results
    assert results[fill]['items'] > 0, results
    assert results[fill]['empty_rss_bytes'] > 0, results
  assert results['transitions']['items'] == 300  # An item a step (no reset).
  assert results['pixel_raw_bytes_per_step'] == 4 * 84 * 84
  for key in ('item_overhead_bytes', 'column_step_overhead_bytes',
              'vector_compression', 'pixel_compression'):
    assert key in results
  # Checkpoints of three table shapes, freed memory returned (as the node
  # does), and of Pong's transitions with it kept.
  assert sorted(results['checkpoints']) == [
      'cheetah_transitions', 'pong_sequences', 'pong_transitions',
      'pong_transitions_kept']
  for name, checkpoints in results['checkpoints'].items():
    assert checkpoints['table_items'] == (25 if name == 'pong_sequences'
                                          else 500)
    assert len(checkpoints['rss_after_checkpoint_bytes']) == 2
    assert all(peak >= 0.9 * after for peak, after in zip(
        checkpoints['rss_peak_during_checkpoint_bytes'],
        checkpoints['rss_after_checkpoint_bytes']))
    assert checkpoints['full_rss_bytes'] > checkpoints['empty_rss_bytes']


def test_atari_backends_measures_both_backends(tmp_path):
  _bench('atari_backends.py', '--steps=200', '--rounds=2', f'--out={tmp_path}')
  results = read_json(os.path.join(tmp_path, 'atari_backends.json'))
  assert sorted(r['backend'] for r in results['rounds']) == [
      'envpool', 'envpool', 'gym', 'gym']
  assert all(r['env_steps_per_second'] > 0 and r['per_cpu_second'] > 0
             for r in results['rounds'])
  assert set(results['medians']) == {'envpool', 'gym'}


@pytest.mark.parametrize('agent, flags', [
    ('r2d2', ('--config.network.head_hidden_layers=(8,)',)),
    ('impala', ('--config.network.conv_channels=(4,)',))])
def test_recurrent_actor_measures_one_and_several_envs_per_actor(agent,
                                                                 flags):
  result = _bench('recurrent_actor.py', f'--config={agent}_minatar',
                  '--envs=1,2', '--seconds=1', '--',
                  '--config.network.lstm_size=8', *flags)
  lines = [l for l in result.stdout.splitlines() if 'env steps/s' in l]
  assert len(lines) == 2, result.stdout[-2000:]
  for line, envs in zip(lines, (1, 2)):
    match = re.search(r'(\w+)_minatar envs_per_actor=(\d+): ([\d,]+) env '
                      r'steps/s', line)
    assert match and match.group(1) == agent, line
    assert int(match.group(2)) == envs, line
    assert int(match.group(3).replace(',', '')) > 0, line


def test_inference_measures_per_actor_and_central_side_by_side(tmp_path):
  # Two tiny R2D2 actors on Pong, each mode once; the node's batches.
  # And the node's step alone at 1 and 2 rows.
  _bench('inference.py', '--configs=r2d2_atari', '--seconds=2', '--settle=2',
         '--batch_sizes=1,2', f'--out={tmp_path}', '--',
         '--config.num_actors=2',
         '--config.r2d2.min_replay_size=1000',
         '--config.r2d2.max_replay_size=1000',
         '--config.network.conv_channels=(4,)',
         '--config.network.conv_kernels=(8,)',
         '--config.network.conv_strides=(8,)', '--config.network.lstm_size=8',
         '--config.network.head_hidden_layers=(8,)')
  results = read_json(os.path.join(tmp_path, 'inference.json'))['results']
  runs = {r['inference']: r for r in results if 'inference' in r}
  assert len(runs) == 2
  assert runs['actor']['env_steps_per_second'] > 0
  assert runs['central']['env_steps_per_second'] > 0
  assert 1 <= runs['central']['batch_calls'] <= 2
  assert runs['central']['batch_rows'] == runs['central']['batch_calls']
  alone = [r for r in results if 'call_ms' in r]
  assert [r['batch_rows'] for r in alone] == [1, 2]
  assert all(r['call_ms'] > 0 and r['call_cpu_ms'] > 0 for r in alone)
  (ratio,) = [r for r in results if 'central_over_actor' in r]
  assert ratio['central_over_actor'] == pytest.approx(
      runs['central']['env_steps_per_second'] /
      runs['actor']['env_steps_per_second'])


def test_population_compares_pbt_and_asha_with_random_search(tmp_path):
  # Two members on the bandit (tests/bandit_env.py), one repetition, and
  # random search of two points with and without ASHA: three sweeps (the
  # full search of the same two points is the repetition's random search).
  # The learning point's return nears 10 within 2,000 steps: one boundary,
  # at 2,000, and 2,000 steps past it.
  _bench('population.py', '--config=smoke',
         '--space=ppo.learning_rate=0.003,0.0', '--steps=4000',
         '--members=2', '--repetitions=1', '--interval=2000',
         '--asha_points=2', '--asha_seed=0', '--asha_grace=500',
         '--eval_every=500',
         f'--out={tmp_path}', '--',
         '--config.env_name=tests.bandit_env:PushBandit-v0',
         '--config.env_max_episode_steps=10', timeout=900)
  results = read_json(os.path.join(tmp_path, 'population.json'))
  [(random, pbt)] = results['repetitions']
  full, early = results['asha']
  assert full == random  # Not run again.
  assert not os.path.exists(os.path.join(tmp_path, 'population', 'random2'))
  for row in (random, pbt, full, early):
    assert row['exit_code'] == 0 and row['programs'] == 2, row
  for row in (random, pbt, full):
    assert row['actor_steps'] >= 2 * 4000, row
  # The population starts from random search's two draws, both programs at
  # once, each through to its budget, frozen at the boundary until the
  # comparison, but for the copy of the learner.
  assert random['launches'] == 2, random
  assert pbt['exploits'] == 1 and pbt['launches'] == 3, pbt
  assert pbt['best_return'] > 5.0, pbt
  assert random['best_return'] > 5.0, random
  assert early['actor_steps'] <= full['actor_steps']
  [rep] = results['comparison']['repetitions']
  assert rep['pbt_best_at_least_random_best'] == (
      pbt['best_return'] >= random['best_return'])
  assert rep['pbt_wall_over_random'] == pytest.approx(
      pbt['wall_seconds'] / random['wall_seconds'])
  assert results['comparison']['asha']['steps_of_full'] == pytest.approx(
      early['actor_steps'] / full['actor_steps'])


def test_evaluate_measures_speed_render_memory_and_a_filmed_episode(tmp_path):
  _bench('evaluate.py', f'--out={tmp_path}', '--episodes=2',
         '--episode_steps=20', '--frames=3', '--atari_steps=30',
         '--rounds=2', timeout=600)
  results = read_json(os.path.join(tmp_path, 'evaluate.json'))
  evaluate, video = results['evaluate'], results['video']
  # Two rounds side by side, each with its ratio; the median of them.
  rounds = evaluate['rounds']
  assert len(rounds) == 2 and evaluate['steps'] == 40
  for one in rounds:
    assert one['steps'] == 40
    assert one['ratio_one_pool'] == pytest.approx(
        one['played_seconds'] / one['one_pool_seconds'])
  assert evaluate['ratio_one_pool_median'] == pytest.approx(
      statistics.median(one['ratio_one_pool'] for one in rounds))
  assert evaluate['in_process']['envpool_alone']['pool_per_env_seconds'] > 0
  assert evaluate['seeded_ratio_one_pool'] > 0  # --seed: one pool.
  assert 0 < evaluate['peak_rss_mib'] < 4096
  assert 0 < results['export']['peak_rss_mib'] < 4096
  assert results['render']['shape'] == [480, 480, 3]
  render = results['render']
  assert render['render_ms'] > 0 and render['tasks_own_render_ms'] > 0
  assert render['ratio'] == pytest.approx(
      render['tasks_own_render_ms'] / render['render_ms'])
  assert render['encode_ms'] > 0
  assert 0 < video['steps'] <= 30 and video['samples'] > 0
  assert video['video_bytes'] > 0
