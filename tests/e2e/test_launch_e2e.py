"""End-to-end: real Launchpad programs (Reverb, Acme PPO, MuJoCo) to a small budget.

The first tests share one real `local_mp` smoke run (`local_mp_run`; its
nodes forked from one fork server, each pinned to a core), looked at while
it runs (its servers, Launchpad's program files) and after it reached its
budget; the last of them resume it (its budget met: nothing to do) to check
the loopback shim's flags.
"""

import os
import shutil
import socket
import stat
import subprocess
import sys

import psutil
import pytest

from acme_launch.stats import spread
from tests.conftest import (REPO_ROOT, actor_steps, node_pids, node_records,
                            read_json, run_launcher, start_launcher, wait_for)
from tests.e2e.conftest import learner_checkpoints


SMOKE_BUDGET = 6000
EXPECTED_NODES = ('replay_0', 'counter_0', 'learner_0', 'actor_0',
                  'evaluator_0')
_LOOPBACK = ('127.0.0.1', '::1', '::ffff:127.0.0.1')
# A shim that cannot be there: its folder does not exist, so it cannot be built.
_NO_SHIM = {'ACME_LAUNCH_LOOPBACK_LIBRARY': '/nonexistent-acme-launch/shim.so'}


def _assert_trained_to_budget(run_dir: str) -> dict:
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= SMOKE_BUDGET
  assert summary['learner_steps'] > 0
  assert summary['evaluator_episodes'] >= 1
  assert summary['last_eval_return'] is not None
  return summary


def _listening(pid: int):
  """(ip, port) of every TCP socket `pid` listens on."""
  return [(c.laddr.ip, c.laddr.port)
          for c in psutil.Process(pid).net_connections(kind='tcp')
          if c.status == psutil.CONN_LISTEN]


def _external_addresses():
  """This machine's addresses other than loopback and link-local."""
  addresses = []
  for entries in psutil.net_if_addrs().values():
    for entry in entries:
      if entry.family not in (socket.AF_INET, socket.AF_INET6):
        continue
      ip = entry.address.split('%')[0]
      if ip in _LOOPBACK or ip.startswith(('127.', 'fe80:')):
        continue
      addresses.append((entry.family, ip))
  return addresses


def _connects(family, ip: str, port: int) -> bool:
  with socket.socket(family, socket.SOCK_STREAM) as s:
    s.settimeout(3)
    try:
      s.connect((ip, port))
    except OSError:
      return False
    return True


def _servers_snapshot(pids):
  """Waits until every node listens; then where, and who answers where."""

  def every_node_listening():
    found = {pid: _listening(pid) for pid in pids}
    return found if all(found.values()) else None

  listening = wait_for(every_node_listening, 90, 'every node process to listen')
  ports = sorted({port for sockets in listening.values() for _, port in sockets})
  return {
      'listening': sorted(s for sockets in listening.values() for s in sockets),
      'loopback_answers': {p: _connects(socket.AF_INET, '127.0.0.1', p)
                           for p in ports},
      'external_answers': {(ip, p): _connects(family, ip, p)
                           for family, ip in _external_addresses()
                           for p in ports},
  }


# Every node of the shared run pinned to one core (0 or 1) with one TF
# thread: settings of its own, applied after the fork.
_PINNED = tuple(f'--config.resources.{group}.cpus=1' for group in (
    'replay', 'counter', 'learner', 'actor', 'evaluator'))


@pytest.fixture(scope='module')
def local_mp_run(tmp_path_factory):
  """A local_mp smoke run to its budget, its nodes forked (the default) and
  pinned, seen while running and after: (its CompletedProcess, its run
  directory, what was seen while it ran)."""
  workdir = str(tmp_path_factory.mktemp('runs'))
  run_dir = os.path.join(workdir, 'mp')
  args = ('--config=smoke', '--node_start=fork', *_PINNED,
          '--config.resources.oversubscribe_cpus=true',
          f'--workdir={workdir}', '--run_name=mp')
  launcher = start_launcher(*args)
  try:
    wait_for(lambda: actor_steps(run_dir) > 0, 240, 'actor steps')
    pids = wait_for(lambda: len(node_pids(run_dir)) == len(EXPECTED_NODES) and
                    node_pids(run_dir), 60, 'every node to record itself')
    seen = _servers_snapshot(pids.values())
    data_files = {}
    for node, pid in pids.items():
      argv = psutil.Process(pid).cmdline()
      data_files[node] = argv[argv.index('--data_file') + 1]
    seen['data_files'] = {
        node: (path, stat.S_IMODE(os.stat(path).st_mode),
               stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode))
        for node, path in data_files.items()}
    seen['pids'] = pids
    stdout, stderr = launcher.communicate(timeout=300)
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()
  result = subprocess.CompletedProcess(args, launcher.returncode, stdout, stderr)
  return result, run_dir, seen


def test_local_mp_smoke_reaches_budget_and_exits_zero(local_mp_run):
  result, run_dir, _ = local_mp_run
  assert result.returncode == 0, result.stderr[-3000:]
  summary = _assert_trained_to_budget(run_dir)
  # The printed summary names the figures a user looks for.
  for line in ('actor steps', 'learner steps', 'wall time', 'env steps/s',
               'last eval return', 'final eval return', 'final eval spread'):
    assert line in result.stdout
  # Actors stop at the episode that reaches the budget (100-step episodes).
  assert summary['actor_steps'] < SMOKE_BUDGET + 100


def test_local_mp_final_evaluation_plays_ten_episodes_at_the_budget(local_mp_run):
  _, run_dir, _ = local_mp_run
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
  result, _, _ = local_mp_run
  _assert_only_launcher_lines(result)


def test_local_mp_writes_a_log_file_per_node_in_the_run_dir(local_mp_run):
  _, run_dir, _ = local_mp_run
  for node in EXPECTED_NODES:
    log = os.path.join(run_dir, 'logs', f'{node}.log')
    assert os.path.getsize(log) > 0, node


def test_local_mp_every_node_ran_in_its_own_process_on_cpu(local_mp_run):
  _, run_dir, _ = local_mp_run
  records = [read_json(os.path.join(run_dir, 'nodes', f'{n}.json'))
             for n in EXPECTED_NODES]
  assert len({r['pid'] for r in records}) == len(EXPECTED_NODES)
  for record in records:
    assert record['jax_platform'] == 'cpu'
    assert record['env']['CUDA_VISIBLE_DEVICES'] == ''
    assert record['tf_visible_gpus'] == []


def test_forked_nodes_train_to_the_budget_each_with_its_own_settings(
    local_mp_run):
  # (--node_start=fork; acme_launch/node/forkserver.py.) Trained to the
  # budget, final evaluation included: the tests above.
  _, run_dir, _ = local_mp_run
  records = node_records(run_dir)
  assert sorted(n.replace('/', '_') for n in records) == sorted(EXPECTED_NODES)
  parents = {record['parent_pid'] for record in records.values()}
  assert len(parents) == 1  # One fork server for all of them...
  server_pid = parents.pop()
  pids = {record['pid'] for record in records.values()}
  assert server_pid not in pids and len(pids) == 5  # ...not a node itself.
  cores = set()
  for node, record in records.items():
    env = record['env']
    assert env['ACME_LAUNCH_NODE'] == node  # Its own env, not the server's.
    assert env['ACME_LAUNCH_RUN_DIR'] == run_dir
    assert env['OMP_NUM_THREADS'] == '1'
    assert record['cpu_affinity'] == env['ACME_LAUNCH_CPUS']  # Pinned.
    cores.add(record['cpu_affinity'])
    assert record['tf_intra_op_threads'] == record['tf_inter_op_threads'] == 1
    assert record['jax_platform'] == 'cpu'
    assert record['tf_visible_gpus'] == []
  assert cores == {'0', '1'}
  # Every planned environment reached every forked node.
  assert_each_node_received_its_planned_resources(run_dir)
  with open(os.path.join(run_dir, 'logs', 'forkserver.log')) as f:
    log = f.read()
  assert 'Traceback' not in log
  # Started while the launcher built the program, with the nodes' settings.
  assert 'fork server started while the launcher prepared the run' in log


def test_run_dir_records_resolved_config_seeds_and_versions(local_mp_run):
  _, run_dir, _ = local_mp_run
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


def test_local_mp_servers_listen_on_loopback_only(local_mp_run):
  _, run_dir, seen = local_mp_run
  listening = seen['listening']
  # Reverb in replay, Courier in every node: at least one server each.
  assert len(listening) >= len(EXPECTED_NODES), listening
  assert all(ip in _LOOPBACK for ip, _ in listening), listening
  assert all(seen['loopback_answers'].values()), seen['loopback_answers']
  # Nothing answers on this machine's other addresses.
  assert not any(seen['external_answers'].values()), [
      k for k, v in seen['external_answers'].items() if v]
  for node in ('replay_0', 'learner_0'):
    env = read_json(os.path.join(run_dir, 'nodes', f'{node}.json'))
    assert env['pid'] in seen['pids'].values()


def test_run_directory_and_launchpad_program_files_are_private(local_mp_run):
  result, run_dir, seen = local_mp_run
  assert result.returncode == 0
  # While it ran: Launchpad's pickled programs lived in the run directory.
  for node, (path, mode, dir_mode) in seen['data_files'].items():
    assert path.startswith(os.path.join(run_dir, '.launchpad') + os.sep), node
    assert os.path.basename(path) == 'job.pkl'
    assert mode & 0o077 == 0, (node, oct(mode))
    assert dir_mode == 0o700, (node, oct(dir_mode))
  # ...and went with the launcher.
  assert os.listdir(os.path.join(run_dir, '.launchpad')) == []
  # Everything the launcher and the nodes wrote is the user's alone.
  assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
  open_to_others = []
  checked = 0
  for root, dirs, files in os.walk(run_dir):
    for name in dirs + files:
      path = os.path.join(root, name)
      checked += 1
      if stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
        open_to_others.append(path)
  assert open_to_others == []
  assert checked > 20  # Logs, metrics, checkpoints, config, summary...
  for name in ('config.json', 'summary.json', 'logs/learner_0.log',
               'metrics/actor_0.csv', 'checkpoints/learner/checkpoint'):
    assert os.path.exists(os.path.join(run_dir, name)), name


# The finished run resumed (after the tests above looked at it): its budget
# is met, so past every check each exits 0 at once.


def test_budget_already_met_exits_zero_without_starting_and_allow_exposed_listeners_passes_the_shim_check_with_a_warning(
    local_mp_run):
  _, run_dir, _ = local_mp_run
  checkpoints = learner_checkpoints(run_dir)
  assert checkpoints
  # As if its launcher had been killed once the budget was reached, before
  # its summary: the launch that finds nothing to do writes one.
  reached = read_json(os.path.join(run_dir, 'summary.json'))
  os.remove(os.path.join(run_dir, 'summary.json'))
  result = run_launcher('--config=smoke', f'--resume={run_dir}',
                        f'--config.max_actor_steps={SMOKE_BUDGET}',
                        '--allow_exposed_listeners', env=_NO_SHIM)
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'nothing to do' in result.stdout
  assert learner_checkpoints(run_dir) == checkpoints  # Nothing trained.
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] == summary['restored_actor_steps'] >= SMOKE_BUDGET
  assert summary['wall_time_seconds'] == 0.0
  assert (summary['final_eval_return_mean'] ==
          reached['final_eval_return_mean'] is not None)
  warnings = [l for l in result.stderr.splitlines()
              if 'acme-launch: warning:' in l and 'every network interface' in l]
  assert len(warnings) == 1, result.stderr


def test_a_network_namespace_with_only_loopback_needs_no_shim(local_mp_run):
  if shutil.which('unshare') is None or subprocess.run(
      ['unshare', '-n', 'true'], capture_output=True, check=False).returncode:
    pytest.skip('cannot make a network namespace here (unshare -n)')
  _, run_dir, _ = local_mp_run
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  result = subprocess.run(
      ['unshare', '-n', sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
       f'--resume={run_dir}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
      env={**os.environ, **_NO_SHIM}, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'nothing to do' in result.stdout
  assert 'acme-launch: warning:' not in result.stderr
  # A summary that says the run reached its budget is kept as it was.
  assert read_json(os.path.join(run_dir, 'summary.json')) == summary


# Other launch types and overrides, each a run of its own ------------------------


def test_local_mt_reaches_budget_its_servers_listen_on_loopback_only_and_its_temp_folder_is_left_empty(
    workdir, tmp_path):
  run_dir = os.path.join(workdir, 'mt')
  temp = tmp_path / 'temp'
  temp.mkdir(mode=0o700)
  launcher = start_launcher('--config=smoke', '--launch_type=local_mt',
                            f'--workdir={workdir}', '--run_name=mt',
                            env={'TMPDIR': str(temp)})
  try:
    wait_for(lambda: actor_steps(run_dir) > 0, 240, 'actor steps')
    # Every node is a thread of the launcher (re-executed with the shim).
    listening = wait_for(
        lambda: len(_listening(launcher.pid)) >= len(EXPECTED_NODES) and
        _listening(launcher.pid), 60, 'every server to listen')
    stdout, stderr = launcher.communicate(timeout=300)
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()
  assert all(ip in _LOOPBACK for ip, _ in listening), listening
  result = subprocess.CompletedProcess(launcher.args, launcher.returncode,
                                       stdout, stderr)
  assert result.returncode == 0, stderr[-3000:]
  assert 'exit reason        budget_reached' in stdout
  _assert_trained_to_budget(run_dir)
  # Node threads' output (Reverb, Launchpad, absl) is in their log instead.
  _assert_only_launcher_lines(result)
  assert os.path.getsize(os.path.join(run_dir, 'logs', 'threads.log')) > 0
  # It ends by os._exit, without exit handlers: TF's AutoGraph files
  # stayed in the temp folder; its private one is removed first.
  assert os.listdir(temp) == []


def test_test_mt_launch_type_reaches_budget(workdir):
  result = run_launcher('--config=smoke', '--launch_type=test_mt',
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


def assert_each_node_received_its_planned_resources(run_dir: str) -> list:
  """Every node process's record has its placement's environment, on the
  CPU; the plan."""
  plan = read_json(os.path.join(run_dir, 'config.json'))['resource_plan']
  for placement in plan:
    record = read_json(os.path.join(
        run_dir, 'nodes', placement['node'].replace('/', '_') + '.json'))
    for key, value in placement['env'].items():
      assert record['env'].get(key) == value, (placement['node'], key)
    assert record['jax_platform'] == 'cpu'
    assert record['tf_visible_gpus'] == []
  return plan


# Each node process receives its planned resources, actor/1 its own settings:
# on the exec'd (and batched) run of test_forkserver.py, where every node
# starts alike (here actor/1, whose OMP_NUM_THREADS differ, would be exec'd
# while actor/0 is forked, and could start after the budget is reached).
# Every planned environment also reaches every forked node: the shared run
# above, its nodes pinned.


# Batched actors (several environments each) reach the budget: with
# --node_start=exec, in test_forkserver.py.
