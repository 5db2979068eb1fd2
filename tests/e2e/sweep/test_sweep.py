"""--sweep: real sweeps of the smoke config packed on this host's cores, and
the sweep launcher's dry run and bad input (the points, slots and cluster
sizing in process: tests/sweep/test_sweep.py)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from acme_launch import errors
from acme_launch.sweep import plan as sweep_plan
from acme_launch.sweep import population
from acme_launch.sweep import points as sweep_points
from acme_launch.sweep import sample as sweep_sample
from acme_launch.testing.launcher import launch_command
from tests.conftest import (REPO_ROOT, actor_steps, alive, killed_on_exit,
                            node_pids, node_records, read_json, run_launcher,
                            start_launcher, user_env, wait_for)


CORES = sorted(os.sched_getaffinity(0))


needs_two_cores = pytest.mark.skipif(
    len(CORES) < 2, reason='two programs at once need two cores')


def _launches(sweep_dir: str) -> dict:
  """Point name -> its launches as sweep.json records them (pid, cores...)."""
  record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  return {p['name']: p['launches'] for p in record['points']}


def _core_list(text: str) -> set:
  """'0-3,8' -> {0, 1, 2, 3, 8}."""
  cores = set()
  for part in text.strip().split(','):
    first, _, last = part.partition('-')
    cores.update(range(int(first), int(last or first) + 1))
  return cores


def _cpus_allowed(pid: int) -> set:
  """The cores a live process may run on, as the kernel says."""
  with open(f'/proc/{pid}/status') as f:
    text = next(l for l in f if l.startswith('Cpus_allowed_list:'))
  return _core_list(text.split(':', 1)[1])


def _listening_ports(run_dir: str) -> set:
  """TCP ports the point's live node processes listen on."""
  import psutil
  ports = set()
  for pid in node_pids(run_dir).values():
    try:
      ports.update(c.laddr.port for c in psutil.Process(pid).connections('tcp')
                   if c.status == psutil.CONN_LISTEN)
    except psutil.Error:
      pass
  return ports


def _summary(sweep_dir: str, point: str) -> dict:
  return read_json(os.path.join(sweep_dir, point, 'summary.json'))


def _running_launchers(sweep_dir: str):
  """Pids of the child launchers that sweep.json says are running now."""
  try:
    launches = _launches(sweep_dir)
  except (FileNotFoundError, json.JSONDecodeError):
    return {}
  return {name: runs[-1]['pid'] for name, runs in launches.items()
          if runs and runs[-1]['ended'] is None}


@needs_two_cores
def test_two_point_sweep_runs_concurrently_on_disjoint_cores_and_tabulates(workdir):
  sweep_dir = os.path.join(workdir, 'seeds')
  started = time.time()
  launcher = start_launcher('--config=smoke', '--sweep=seed=0,1',
                            '--max_concurrent=2', '--config.max_actor_steps=2000',
                            '--progress_every=5', f'--workdir={workdir}',
                            '--run_name=seeds')
  with killed_on_exit(launcher):
    # Both child launchers run at once, each on its own cores (the kernel's
    # view of the live processes). Before them: the points' checks, the
    # sweep's local Ray instance and a Tune trial worker each.
    running = wait_for(lambda: len(_running_launchers(sweep_dir)) == 2 and
                       _running_launchers(sweep_dir), 120, 'two child launchers')
    allowed = {name: _cpus_allowed(pid) for name, pid in running.items()}
    # At this process's priority, not that of Ray's workers (niceness 15).
    niceness = {os.getpriority(os.PRIO_PROCESS, pid) for pid in running.values()}
    # Two programs' servers on one host: Launchpad picks its ports itself,
    # and the two never share one.
    points = [os.path.join(sweep_dir, p) for p in ('seed=0', 'seed=1')]
    wait_for(lambda: all(actor_steps(p) > 0 for p in points), 300,
             'actor steps in both points')
    ports = [_listening_ports(p) for p in points]
    stdout, stderr = launcher.communicate(timeout=360)
  took = time.time() - started
  assert launcher.returncode == 0, stdout[-2000:] + stderr[-2000:]
  assert allowed['seed=0'] and allowed['seed=1']
  assert not allowed['seed=0'] & allowed['seed=1']
  assert niceness == {os.getpriority(os.PRIO_PROCESS, 0)}
  assert ports[0] and ports[1] and not ports[0] & ports[1]

  launches = _launches(sweep_dir)
  record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  assert record['fields'] == ['seed']
  assert '--config.max_actor_steps=2000' in record['base_argv']
  assert not any(a.startswith(('--sweep', '--max_concurrent', '--workdir'))
                 for a in record['base_argv'])
  cores = {name: set(runs[0]['cores']) for name, runs in launches.items()}
  assert cores == allowed  # What sweep.json records is what they ran on.
  assert set().union(*cores.values()) <= set(CORES)
  for name in ('seed=0', 'seed=1'):
    summary = _summary(sweep_dir, name)
    assert summary['exit_reason'] == 'budget_reached'
    assert summary['actor_steps'] >= 2000
    # Every node of the point ran within its launcher's cores.
    for node, rec in node_records(os.path.join(sweep_dir, name)).items():
      assert _core_list(rec['cpu_affinity']) <= cores[name], node
    # Its seed reached the program; its output went to its own log.
    config = read_json(os.path.join(sweep_dir, name, 'config.json'))
    assert config['config']['seed'] == int(name.split('=')[1])
    assert 'budget_reached' in open(os.path.join(sweep_dir, 'logs',
                                                 f'{name}.log')).read()

  # One progress line per program; the table, printed and written.
  assert 'progress: seed=0 |' in stdout and 'progress: seed=1 |' in stdout
  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  rows = {r['point']: r for r in table['points']}
  assert set(rows) == {'seed=0', 'seed=1'}
  for name, row in rows.items():
    assert row['exit_reason'] == 'budget_reached'
    assert row['final_return'] == _summary(sweep_dir, name)['final_eval_return_mean']
    assert row['wall_time_seconds'] > 0
  (setting,) = table['settings']
  assert setting['seeds'] == [0, 1]
  finals = [rows['seed=0']['final_return'], rows['seed=1']['final_return']]
  assert setting['final_return_mean'] == pytest.approx(sum(finals) / 2)
  assert setting['final_return_std'] == pytest.approx(abs(finals[0] - finals[1]) / 2)
  assert 'final return mean +- std' in stdout
  assert f'{setting["final_return_mean"]:.1f} +- {setting["final_return_std"]:.1f}' in stdout
  # Two seeds: the mean's 95% bootstrap interval runs from one to the other
  # (each resample draws both runs from one seed with chance 1/4).
  mean = setting['final_return_intervals']['mean']
  assert setting['runs'] == 2
  assert (mean['low'], mean['high']) == (min(finals), max(finals))
  assert 'final return IQM, median, mean [95% bootstrap interval]' in stdout
  assert table['failed'] == []
  print(f'two-point sweep: {took:.0f} s')

  plot = subprocess.run([sys.executable, '-m', 'acme_launch.plot', sweep_dir],
                        cwd=REPO_ROOT, capture_output=True, text=True, check=False)
  assert plot.returncode == 0, plot.stderr
  for name in ('eval_return.png', 'final_return_intervals.png',
               'performance_profile.png'):
    with open(os.path.join(sweep_dir, 'plots', name), 'rb') as f:
      assert f.read(8) == b'\x89PNG\r\n\x1a\n'


@needs_two_cores
def test_a_failed_point_is_retried_then_leaves_the_other_to_finish_and_exits_1(
    workdir):
  sweep_dir = os.path.join(workdir, 'failing')
  launcher = start_launcher('--config=smoke', '--sweep=seed=0,1',
                            '--config.max_actor_steps=2000',
                            '--max_node_restarts=0', '--trial_retries=1',
                            f'--workdir={workdir}', '--run_name=failing')
  with killed_on_exit(launcher):
    failing = os.path.join(sweep_dir, 'seed=1')
    killed = []
    for _ in range(2):  # Once retried (--trial_retries=1), then for good.
      wait_for(lambda: os.path.isdir(os.path.join(failing, 'nodes')) and
               node_pids(failing).get('actor/0') not in (None, *killed),
               240, 'actor/0 of seed=1')
      killed.append(node_pids(failing)['actor/0'])
      os.kill(killed[-1], signal.SIGKILL)
    stdout, stderr = launcher.communicate(timeout=360)
  assert launcher.returncode == 1, stdout[-2000:] + stderr[-2000:]
  assert 'a failed program started again up to 1 time;' in stdout
  assert _summary(sweep_dir, 'seed=0')['exit_reason'] == 'budget_reached'
  failed = _summary(sweep_dir, 'seed=1')
  assert failed['exit_reason'] == 'node_failed'
  assert failed['failed_node'] == 'actor/0'
  assert 'did not reach their budget: seed=1;' in stderr
  # The first failure: said, and its program started again from its
  # checkpoints, in the same run directory.
  assert ('seed=1 failed: node_failed (actor/0); starting it again from its '
          'checkpoints') in stdout
  first, second = _launches(sweep_dir)['seed=1']
  assert first['retried'] and first['exit_reason'] == 'node_failed'
  assert second['resumed'] and second['exit_code'] == 1
  # Why, without opening the log: its end, the failed node's lines among them.
  tail = stdout.split('acme-launch: sweep: the end of that log:\n', 1)[1]
  assert '  | acme-launch: node actor/0 failed' in tail
  assert 'was killed by signal 9' in tail
  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  assert table['failed'] == ['seed=1']
  # Its mid-run return is no final one: shown apart, out of the figures.
  row = {r['point']: r for r in table['points']}['seed=1']
  assert row['final_return'] is None
  assert row['last_return'] == failed['last_eval_return']
  assert table['settings'][0]['runs'] == 1
  assert 'seed=1 did not reach its budget (node_failed): ' in stdout


@needs_two_cores
def test_sigterm_stops_every_program_and_leaves_no_process(workdir):
  # Ctrl-C (SIGINT): test_resume_runs_only_the_unfinished_points.
  signum, code, reason = signal.SIGTERM, 143, 'terminated'
  sweep_dir = os.path.join(workdir, 'stopped')
  launcher = start_launcher('--config=smoke', '--sweep=seed=0,1',
                            '--config.max_actor_steps=10000000',
                            f'--workdir={workdir}', '--run_name=stopped')
  with killed_on_exit(launcher):
    points = [os.path.join(sweep_dir, p) for p in ('seed=0', 'seed=1')]
    wait_for(lambda: all(actor_steps(p) > 0 for p in points), 300,
             'actor steps in both points')
    launchers = list(_running_launchers(sweep_dir).values())
    nodes = [pid for p in points for pid in node_pids(p).values()]
    assert len(launchers) == 2 and len(nodes) == 10
    launcher.send_signal(signum)
    interrupted_at = time.time()
    stdout, stderr = launcher.communicate(timeout=120)
  assert time.time() - interrupted_at < 60
  assert launcher.returncode == code, stdout[-2000:] + stderr[-2000:]
  assert alive(launchers + nodes) == []
  for point in points:  # Each launcher stopped its program cleanly.
    assert read_json(os.path.join(point, 'summary.json'))['exit_reason'] == reason
    assert os.path.isfile(os.path.join(point, 'checkpoints', 'learner', 'checkpoint'))
  assert f'--resume={sweep_dir}' in stderr


def test_kill_9_of_the_sweep_launcher_takes_every_program_with_it(workdir):
  sweep_dir = os.path.join(workdir, 'orphans')
  launcher = start_launcher('--config=smoke', '--sweep=seed=0,1',
                            '--config.max_actor_steps=10000000',
                            f'--workdir={workdir}', '--run_name=orphans')
  with killed_on_exit(launcher):
    points = [os.path.join(sweep_dir, p) for p in ('seed=0', 'seed=1')]
    wait_for(lambda: all(len(node_pids(p)) == 5 for p in points
                         if os.path.isdir(os.path.join(p, 'nodes'))) and
             all(os.path.isdir(os.path.join(p, 'nodes')) for p in points),
             300, 'every node of both points')
    pids = list(_running_launchers(sweep_dir).values()) + [
        pid for p in points for pid in node_pids(p).values()]
    launcher.kill()
    launcher.communicate(timeout=30)
  wait_for(lambda: not alive(pids), 20, 'child launchers and nodes to die')


def test_resume_runs_only_the_unfinished_points(workdir):
  sweep_dir = os.path.join(workdir, 'half')
  launcher = start_launcher('--config=smoke', '--sweep=seed=0,1',
                            '--max_concurrent=1', '--config.max_actor_steps=3000',
                            f'--workdir={workdir}', '--run_name=half')
  with killed_on_exit(launcher):
    second = os.path.join(sweep_dir, 'seed=1')
    wait_for(lambda: actor_steps(second) > 0, 360, 'seed=1 to step')
    pids = list(_running_launchers(sweep_dir).values()) + list(
        node_pids(second).values())
    assert len(pids) == 6
    # Ctrl-C: the running program stops as a single run does.
    launcher.send_signal(signal.SIGINT)
    interrupted_at = time.time()
    _, stderr = launcher.communicate(timeout=120)
  assert time.time() - interrupted_at < 60
  assert launcher.returncode == 130
  assert alive(pids) == []
  assert f'--resume={sweep_dir}' in stderr
  assert _summary(sweep_dir, 'seed=0')['exit_reason'] == 'budget_reached'
  assert _summary(sweep_dir, 'seed=1')['exit_reason'] == 'interrupted'
  assert os.path.isfile(os.path.join(second, 'checkpoints', 'learner',
                                     'checkpoint'))
  steps_before = _summary(sweep_dir, 'seed=1')['actor_steps']
  finished_mtime = os.path.getmtime(os.path.join(sweep_dir, 'seed=0', 'summary.json'))

  result = run_launcher(f'--resume={sweep_dir}', timeout=360)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
  assert '1 to run' in result.stdout
  assert 'seed=0 started' not in result.stdout
  assert 'seed=1 started' in result.stdout and '(resumed)' in result.stdout
  assert os.path.getmtime(os.path.join(sweep_dir, 'seed=0', 'summary.json')) == finished_mtime
  assert len(_launches(sweep_dir)['seed=0']) == 1
  resumed = _summary(sweep_dir, 'seed=1')
  assert resumed['exit_reason'] == 'budget_reached'
  assert resumed['restored_actor_steps'] >= steps_before > 0
  assert _launches(sweep_dir)['seed=1'][-1]['resumed']
  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  assert [r['exit_reason'] for r in table['points']] == ['budget_reached'] * 2

  # Nothing left to run: the table again, exit 0.
  again = run_launcher(f'--resume={sweep_dir}')
  assert again.returncode == 0, again.stderr
  assert '0 to run' in again.stdout


# Two programs started at once on a host whose free ports are few: each
# launcher chooses its servers' ports before its nodes bind them, and the
# other's choices and connections must not take them in between (without
# run/ports.py's holder, 5 of 5 such sweeps lost a node: "Failed to start
# Courier gRPC server"). In a network namespace of the test's own.
_FEW_PORTS = ('ip link set lo up && '
              'echo "40000 40059" > /proc/sys/net/ipv4/ip_local_port_range && '
              'exec "$@"')


@needs_two_cores
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('unshare'),
                    reason='a network namespace of its own needs root')
def test_random_search_of_two_programs_at_once_among_few_free_ports(workdir):
  # Random search's points, drawn from ranges; both started at once where
  # free ports are few.
  sweep_dir = os.path.join(workdir, 'drawn')
  specs = 'ppo.learning_rate=loguniform(1e-4,1e-3);ppo.num_epochs=int(1,2)'
  result = subprocess.run(
      ['unshare', '--net', 'sh', '-c', _FEW_PORTS, 'sh', *launch_command(
          '--config=smoke', f'--sweep={specs}', '--sweep_samples=2',
          '--max_concurrent=2', '--config.max_actor_steps=1000',
          f'--workdir={workdir}', '--run_name=drawn')],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=420,
      env=user_env(), check=False)
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
  assert 'drawn with --sweep_seed=0' in result.stdout
  record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  assert record['random_search'] == {'samples': 2, 'seed': 0, 'specs': [specs]}
  # The points are the draws of seed 0 (the default), as flags of the points.
  fields = sweep_points.parse_specs([specs])
  drawn = sweep_sample.draw(fields, sweep_sample.parse_ranges(fields), 2, 0)
  assert [p['args'] for p in record['points']] == [
      [f'--config.ppo.learning_rate={lr}', f'--config.ppo.num_epochs={n}']
      for lr, n in drawn]
  names = [p['name'] for p in record['points']]
  for point in record['points']:
    # What the program ran with: the drawn value, of the field's type.
    ppo = read_json(os.path.join(sweep_dir, point['name'],
                                 'config.json'))['config']['ppo']
    assert type(ppo['learning_rate']) is float and type(ppo['num_epochs']) is int
    assert 1e-4 <= ppo['learning_rate'] <= 1e-3 and ppo['num_epochs'] in (1, 2)
    assert point['fields'] == {'ppo.learning_rate': ppo['learning_rate'],
                               'ppo.num_epochs': ppo['num_epochs']}
    summary = _summary(sweep_dir, point['name'])
    assert summary['exit_reason'] == 'budget_reached'
    assert summary['node_restarts_total'] == 0
  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  assert [r['point'] for r in table['points']] == names
  assert table['failed'] == []

  # Resumed: the same points, none drawn anew, none run again.
  again = run_launcher(f'--resume={sweep_dir}')
  assert again.returncode == 0, again.stderr
  assert '0 to run' in again.stdout
  assert [p['name'] for p in read_json(
      os.path.join(sweep_dir, 'sweep.json'))['points']] == names


def _one_gpu_inventory(tmp_path, count: int = 1) -> str:
  path = tmp_path / f'gpus_{count}.json'
  path.write_text(json.dumps([{'index': i, 'name': 'NVIDIA H100 80GB HBM3',
                               'memory_mb': 81559} for i in range(count)]))
  return str(path)


@pytest.mark.parametrize('args, expected', [
    (['--sweep=seedz=0,1'], 'seedz is not a field'),
    (['--sweep=ppo.learning_rat=1e-3,3e-4'], 'ppo.learning_rat is not a field'),
    (['--sweep=seed=0,zero'], "sweep point seed=zero: flag --config.seed=zero"),
    (['--sweep=ppo.learning_rate=fast'], 'could not convert'),
    (['--sweep=num_actors=1,0'], 'sweep point num_actors=0: config.num_actors'),
    (['--sweep=seed'], 'expected FIELD=VALUE1,VALUE2'),
    (['--sweep=seed=0,00'], 'the same point seed=0'),
    (['--sweep=seed=0,1', '--config.seed=3'], 'also set by --config.seed=3'),
    (['--sweep=seed=0,1', f'--max_concurrent={len(CORES) + 1}'],
     f'may use {len(CORES)} cores'),
    (['--sweep=seed=0,1', '--max_concurrent=2', '--gpu_inventory=ONE_GPU'],
     'this host has 1 GPUs'),
    (['--sweep=seed=0,1', '--debug_node=actor/0'], '--debug_node'),
    (['--sweep=seed=0,1', '--launch_type=local_mt'], 'not with --launch_type=local_mt'),
    (['--max_concurrent=2'], 'goes with --sweep'),
    # Random search (--sweep_samples).
    (['--sweep=ppo.learning_rate=loguniform(1e-5,1e-3)'],
     'is a range: random search needs --sweep_samples=N'),
    (['--sweep=ppo.learning_rate=uniform(1e-3,1e-5)', '--sweep_samples=2'],
     'an empty range'),
    (['--sweep=ppo.learning_rate=loguniform(0,1e-3)', '--sweep_samples=2'],
     'loguniform needs LOW > 0'),
    (['--sweep=ppo.learning_rate=normal(0,1)', '--sweep_samples=2'],
     'unknown distribution normal'),
    (['--sweep=env_name=uniform(0,1)', '--sweep_samples=2'],
     'env_name is str in the config'),
    (['--sweep=ppo.normalize_rewards=int(0,1)', '--sweep_samples=2'],
     'ppo.normalize_rewards is bool in the config'),
    (['--sweep=ppo.num_epochs=uniform(1,4)', '--sweep_samples=2'],
     'ppo.num_epochs is int in the config; give it int(LOW,HIGH)'),
    (['--sweep=seed=0,1', '--sweep_samples=0'],
     '--sweep_samples=0: 0 is not a positive integer'),
    (['--sweep=seed=0,1', '--sweep_samples=3'], 'give only 2 distinct points'),
    (['--sweep_samples=2'], '--sweep_samples goes with --sweep'),
    (['--sweep=seed=0,1', '--sweep_seed=1'],
     '--sweep_seed goes with --sweep_samples'),
    # Early stopping (--sweep_scheduler=asha); smoke: 6,000 steps, eval
    # every 1,000.
    (['--sweep_scheduler=asha'], '--sweep_scheduler goes with --sweep'),
    (['--sweep=seed=0,1', '--asha_grace_steps=2000'],
     '--asha_grace_steps and --asha_reduction go with --sweep_scheduler=asha'),
    (['--sweep=seed=0,1', '--sweep_scheduler=asha', '--asha_grace_steps=2001'],
     'the first rung must be at most the budget / 3 (2,000 actor steps)'),
    (['--sweep=seed=0,1', '--sweep_scheduler=asha', '--asha_grace_steps=500'],
     'the first rung comes before the first evaluation'),
    # Population-based training (--sweep_scheduler=pbt).
    (['--trial_retries=1'], '--trial_retries goes with --sweep'),
    (['--sweep=seed=0,1', '--pbt_quantile=0.25'],
     '--pbt_interval_steps, --pbt_quantile and --pbt_freeze go with '
     '--sweep_scheduler=pbt'),
    (['--sweep=ppo.learning_rate=3e-4', '--sweep_scheduler=pbt'],
     'a population of 1 member; it needs at least 2'),
    (['--sweep=network.policy_layers=(8,8),(16,16)', '--sweep_scheduler=pbt'],
     "network.policy_layers cannot be in a population's space: it sets the "
     "networks' shapes"),
    (['--sweep=num_actors=1,2', '--sweep_scheduler=pbt'],
     "num_actors cannot be in a population's space: it sets the program's "
     'nodes'),
    (['--sweep=ppo.learning_ratez=1e-3,3e-4', '--sweep_scheduler=pbt'],
     'ppo.learning_ratez is not a field'),
    (['--sweep=ppo.learning_rate=3e-4,1e-3', '--sweep_scheduler=pbt',
      '--pbt_interval_steps=500'], 'shorter than the evaluation period'),
    (['--sweep=ppo.learning_rate=3e-4,1e-3', '--sweep_scheduler=pbt',
      '--pbt_quantile=0.75'], '--pbt_quantile must be a fraction above 0'),
])
def test_bad_sweep_input_is_refused_before_anything_is_made(
    cli_module, workdir, tmp_path, args, expected):
  # Decided in this process as the launcher decides (cli.decide_sweep); the
  # launcher's one line and exit 2 for it: the test below.
  if 'may use' in expected and len(CORES) + 1 < 2:
    pytest.skip('needs two cores')
  if '--max_concurrent=2' in args and 'GPU' in expected and len(CORES) < 2:
    pytest.skip('needs two cores')
  args = [a.replace('ONE_GPU', _one_gpu_inventory(tmp_path)) for a in args]
  with pytest.raises(errors.LaunchError) as refused:
    _decide_sweep('--config=smoke', *args, f'--workdir={workdir}',
                  '--run_name=bad')
  assert expected in str(refused.value)
  assert '\n' not in str(refused.value)
  assert os.listdir(workdir) == []


@pytest.mark.parametrize('args, expected', [
    # Refused as the flags are read, as a point is checked, as the
    # population is planned.
    (['--max_concurrent=2'], 'goes with --sweep'),
    (['--sweep=seed=0,zero'], "sweep point seed=zero: flag --config.seed=zero"),
    (['--sweep=ppo.learning_rate=3e-4,1e-3', '--sweep_scheduler=pbt',
      '--pbt_interval_steps=500'], 'shorter than the evaluation period'),
])
def test_bad_sweep_input_is_one_line_exit_2_and_creates_nothing(
    workdir, args, expected):
  result = run_launcher('--config=smoke', *args, f'--workdir={workdir}',
                        '--run_name=bad')
  assert result.returncode == 2, result.stdout + result.stderr
  assert 'Traceback' not in result.stderr
  assert result.stdout == ''
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith('acme-launch: error:'), lines
  assert expected in lines[0]
  assert os.listdir(workdir) == []


def _decide_sweep(*args: str):
  """What the launcher decides for `launch.py ARGS`, in this process (the
  cli_module fixture: as the launcher runs it): cli.decide_sweep, or
  without --sweep a single run's decision, as cli.main chooses."""
  from acme_launch import cli
  from acme_launch import prepare
  from acme_launch.config import options as options_lib
  options = options_lib.parse_again(['launch.py', *args])
  if not options.sweep:
    return prepare.check_arguments(['launch.py', *args])
  return cli.decide_sweep(options)


def _dry_run_text(*args: str) -> str:
  """What `launch.py ARGS --dry_run` prints for a sweep, decided in this
  process."""
  sweep = _decide_sweep(*args, '--dry_run')
  return sweep_plan.describe_dry_run(sweep.options, sweep.record, sweep.todo,
                                     sweep.slots) + '\n'


def test_dry_run_prints_points_and_slots_and_starts_nothing(
    cli_module, workdir, tmp_path):
  # Decided in this process as the launcher decides; the launcher's own
  # sweep dry run: tests/e2e/test_own_agents.py.
  out = _dry_run_text('--config=smoke', '--sweep=ppo.learning_rate=3e-4,1e-3',
                      '--sweep=seed=0,1',
                      f'--gpu_inventory={_one_gpu_inventory(tmp_path)}',
                      f'--workdir={workdir}', '--run_name=dry')
  for name in ('ppo.learning_rate=0.0003,seed=0', 'ppo.learning_rate=0.001,seed=1'):
    assert name in out
  # Their learners use the one GPU: one program at a time, with GPU 0.
  assert '1 at once' in out and 'slot 0: cores' in out and 'GPUs 0' in out
  assert 'nothing was started' in out
  assert os.listdir(workdir) == []


@pytest.mark.parametrize('members, args, at_once, how', [
    # A slot each on this host's cores: every member at once, frozen at a
    # boundary until the comparison; on fewer cores, turns on the slots.
    (2, [], min(2, len(CORES)), 'frozen' if len(CORES) >= 2 else
     'frozen turns'),
    (3, [], min(3, len(CORES)), 'frozen' if len(CORES) >= 3 else
     'frozen turns'),
    # Every member at once when asked, on fewer cores: they share them.
    (3, ['--max_concurrent=3'], 3, 'frozen'),
    # Fewer at once than members: they take turns, frozen between them or,
    # when asked (or a frozen program would hold a GPU), stopped.
    (2, ['--max_concurrent=1'], 1, 'frozen turns'),
    (2, ['--max_concurrent=1', '--nopbt_freeze'], 1, 'turns'),
    (2, ['--gpu_inventory=ONE_GPU'], 1, 'turns'),
])
def test_a_populations_dry_run_says_whether_its_members_run_at_once(
    cli_module, workdir, tmp_path, members, args, at_once, how):
  args = [a.replace('ONE_GPU', _one_gpu_inventory(tmp_path)) for a in args]
  rates = ','.join(['1e-4', '3e-4', '1e-3'][:members])
  first = _dry_run_text('--config=smoke', f'--sweep=ppo.learning_rate={rates}',
                        '--sweep_scheduler=pbt', *args,
                        f'--workdir={workdir}', '--run_name=dry').splitlines()[0]
  assert f'{members} to run, {at_once} at once' in first, first
  shared = at_once == members > len(CORES)
  assert (f'(every member; {len(CORES)} slot' in first) == shared, first
  assert first.endswith(f'; {population.HOW[how]}); sweep directory '
                        f'{os.path.join(workdir, "dry")}'), first
  assert os.listdir(workdir) == []


@needs_two_cores
def test_dry_run_gives_each_slot_its_own_gpus(cli_module, workdir, tmp_path):
  out = _dry_run_text('--config=smoke', '--sweep=seed=0,1,2',
                      f'--gpu_inventory={_one_gpu_inventory(tmp_path, 2)}',
                      f'--workdir={workdir}')
  assert '2 at once' in out
  slots = [l.strip() for l in out.splitlines()
           if l.strip().startswith('slot ')]
  assert len(slots) == 2
  assert slots[0].startswith('slot 0: cores') and slots[0].endswith('GPUs 0')
  assert slots[1].startswith('slot 1: cores') and slots[1].endswith('GPUs 1')
  assert os.listdir(workdir) == []


def test_resume_of_a_sweep_takes_no_other_flags(workdir):
  sweep_dir = os.path.join(workdir, 'made')
  os.makedirs(sweep_dir)
  with open(os.path.join(sweep_dir, 'sweep.json'), 'w') as f:
    json.dump({'points': [], 'base_argv': ['--config=smoke']}, f)
  result = run_launcher(f'--resume={sweep_dir}', '--show_output')
  assert result.returncode == 2
  assert 'not --show_output' in result.stderr.strip().splitlines()[-1]
  assert os.listdir(sweep_dir) == ['sweep.json']
