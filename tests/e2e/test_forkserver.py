"""--node_start: real runs whose node processes are forked from one fork
server (acme_launch/node/forkserver.py; the default), and one whose nodes
are each a fresh Python (exec)."""

import os
import signal
import time

import psutil

from tests.conftest import (actor_steps, alive, killed_on_exit, node_records,
                            read_json, run_launcher, start_launcher,
                            wait_for)
from tests.e2e.test_launch_e2e import (EXPECTED_NODES,
                                       _assert_trained_to_budget)



def test_forked_nodes_train_to_the_budget_each_with_its_own_settings(workdir):
  # Every node pinned to one core (0 or 1) with one TF thread: settings of
  # its own, applied after the fork.
  pinned = [f'--config.resources.{group}.cpus=1' for group in (
      'replay', 'counter', 'learner', 'actor', 'evaluator')]
  result = run_launcher('--config=smoke', '--node_start=fork', *pinned,
                        '--config.resources.oversubscribe_cpus=true',
                        f'--workdir={workdir}', '--run_name=forked')
  run_dir = os.path.join(workdir, 'forked')
  assert result.returncode == 0, result.stderr[-3000:]
  _assert_trained_to_budget(run_dir)
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert final['episodes'] == 10
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
  with open(os.path.join(run_dir, 'logs', 'forkserver.log')) as f:
    log = f.read()
  assert 'Traceback' not in log
  # Started while the launcher built the program, with the nodes' settings.
  assert 'fork server started while the launcher prepared the run' in log


def test_node_start_exec_starts_every_node_as_a_fresh_python(workdir):
  result = run_launcher('--config=smoke', '--node_start=exec',
                        f'--workdir={workdir}', '--run_name=execd')
  run_dir = os.path.join(workdir, 'execd')
  assert result.returncode == 0, result.stderr[-3000:]
  _assert_trained_to_budget(run_dir)
  records = node_records(run_dir)
  assert len(records) == 5
  # Every node is a child of the launcher itself; no fork server ran.
  assert len({record['parent_pid'] for record in records.values()}) == 1
  assert len({record['pid'] for record in records.values()}) == 5
  assert not os.path.exists(os.path.join(run_dir, 'logs', 'forkserver.log'))


def test_forked_actor_killed_is_restarted_and_ctrl_c_leaves_no_process(workdir):
  run_dir = os.path.join(workdir, 'forked_kill')
  # The learner alone pinned: its OMP_NUM_THREADS=1 is read when numpy
  # loads, so it is exec'd; the other nodes are forked.
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            '--config.resources.learner.cpus=1',
                            '--node_start=fork', '--max_node_restarts=1',
                            f'--workdir={workdir}', '--run_name=forked_kill')
  try:
    wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
    records = node_records(run_dir)
    server_pid = records['actor/0']['parent_pid']
    assert 'acme_launch.node.forkserver' in ' '.join(
        psutil.Process(server_pid).cmdline())
    assert {records[n]['parent_pid'] for n in (
        'replay/0', 'counter/0', 'evaluator/0')} == {server_pid}
    assert records['learner/0']['parent_pid'] == launcher.pid
    assert records['learner/0']['cpu_affinity'] == '0'
    with open(os.path.join(run_dir, 'logs', 'learner_0.log')) as f:
      assert ('started by exec, not forked: its OMP_NUM_THREADS differ '
              "from the fork server's") in f.read()
    killed = records['actor/0']['pid']
    os.kill(killed, signal.SIGKILL)
    # The restarted actor is forked again, by the same fork server.
    restarted = wait_for(
        lambda: (node_records(run_dir)['actor/0']
                 if node_records(run_dir)['actor/0']['pid'] != killed
                 else None), 120, 'the restarted actor')
    assert restarted['parent_pid'] == server_pid
    assert restarted['env']['ACME_LAUNCH_NODE_RESTART'] == '1'
    steps = actor_steps(run_dir)
    wait_for(lambda: actor_steps(run_dir) > steps, 120,
             'actor steps after the restart')
    pids = [r['pid'] for r in node_records(run_dir).values()]
    launcher.send_signal(signal.SIGINT)
    interrupted_at = time.time()
    stdout, stderr = launcher.communicate(timeout=60)
  finally:
    if launcher.poll() is None:
      launcher.kill()
  assert time.time() - interrupted_at < 40
  assert launcher.returncode == 130, stderr[-3000:]
  assert 'node actor/0 was killed by signal 9; restarting it' in stdout
  assert alive([*pids, server_pid]) == []
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'interrupted'
  for component in ('learner', 'counter'):
    assert os.path.isfile(os.path.join(run_dir, 'checkpoints', component,
                                       'checkpoint'))


def test_the_fork_server_killed_stops_the_run_and_names_it(workdir):
  run_dir = os.path.join(workdir, 'server_killed')
  launcher = start_launcher('--config=smoke', '--config.max_actor_steps=10000000',
                            '--node_start=fork', f'--workdir={workdir}',
                            '--run_name=server_killed')
  try:
    wait_for(lambda: actor_steps(run_dir) > 0, 180, 'actor steps')
    records = node_records(run_dir)
    server_pid = records['actor/0']['parent_pid']
    os.kill(server_pid, signal.SIGKILL)
    killed_at = time.time()
    stdout, stderr = launcher.communicate(timeout=60)
  finally:
    if launcher.poll() is None:
      launcher.kill()
  assert time.time() - killed_at < 30
  assert launcher.returncode == 1
  assert 'node forkserver failed' in stderr + stdout
  assert 'the fork server (--node_start=fork)' in stderr + stdout
  assert read_json(os.path.join(run_dir, 'summary.json'))[
      'failed_node'] == 'forkserver'
  # Its nodes died with it (PR_SET_PDEATHSIG).
  assert alive([r['pid'] for r in records.values()] + [server_pid]) == []


def _fork_servers_of(pid: int) -> set:
  """The fork servers that process `pid` started and that run now."""
  try:
    children = psutil.Process(pid).children()
  except psutil.NoSuchProcess:
    return set()
  found = set()
  for child in children:
    try:
      if 'acme_launch.node.forkserver' in ' '.join(child.cmdline()):
        found.add(child.pid)
    except psutil.NoSuchProcess:
      pass
  return found


def test_an_input_refused_after_the_fork_server_started_leaves_nothing(
    workdir):
  # The replay check comes after the fork server's early start (the program
  # must be built to size the replay): refused, the server stops first.
  launcher = start_launcher('--config=r2d2_atari',
                            '--config.r2d2.max_replay_size=10000000',
                            f'--workdir={workdir}', '--run_name=refused')
  servers = set()
  with killed_on_exit(launcher):
    deadline = time.time() + 300
    while launcher.poll() is None and time.time() < deadline:
      servers |= _fork_servers_of(launcher.pid)  # Its own, while it runs.
      time.sleep(0.05)
    stdout, stderr = launcher.communicate(timeout=60)
  assert launcher.returncode == 2, stderr[-3000:]
  lines = stderr.strip().splitlines()
  assert len(lines) == 1 and 'the replay node would need about' in lines[0]
  assert not os.path.exists(os.path.join(workdir, 'refused'))
  assert len(servers) == 1  # It had started...
  assert alive(servers) == []  # ...and is gone.
