"""Issue 44: no process of another user gets an answer from any node
listener of a local run, under local_mp and local_mt, with the launcher run
as root or as an ordinary user, while the run reaches its budget.

Each case is one real smoke run, held at an environment step
(tests/faulty_env.py) once the actor's first episodes are counted, so that
every server is up and nothing ends while the test looks. Its listening
sockets are those of the launcher's process tree (the nodes, the fork
server; under local_mt the launcher itself). Against each port,
tests/intruder.py as `nobody` tries what an attacker would (raw HTTP/2,
Courier's method list, get_variables, get_counts, a Courier call whose
argument decodes to os.system writing a sentinel file, Reverb's
server_info) and must get no answer and leave no sentinel; then the same as
the run's own user must get every answer, the sentinel included (the attack
is real, and the servers kept listening after the refusals). The run is then
released and must reach its budget. The shim alone: tests/run/test_loopback.py.

The local_mp case with the launcher as root runs with --run_key=all: there
the run's own user without the run's key gets nothing either, and with it
(the shim preloaded, the node's key file and the run's ports, as a node
has them) every answer.
"""

import json
import os
import shutil
import subprocess
import sys

import psutil
import pytest

from acme_launch.run import loopback
from acme_launch.testing.launcher import launch_command
from tests import faulty_env, other_user
from tests.conftest import (REPO_ROOT, actor_steps, node_records, read_json,
                            user_env, wait_for)

TASK = '--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4'
BUDGET = 1000   # Past the hold; the learner has trained by then.
HOLD_AT_STEP = 250   # Past two 100-step episodes: actor steps counted.
NODES = 5            # replay, counter, learner, actor, evaluator.


def _listening_ports(pid: int):
  """Ports that `pid` and its descendants listen on (TCP)."""
  try:
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
  except psutil.NoSuchProcess:
    return set()
  ports = set()
  for process in processes:
    try:
      ports.update(c.laddr.port for c in process.net_connections(kind='inet')
                   if c.status == psutil.CONN_LISTEN)
    except psutil.NoSuchProcess:
      pass
  return ports


def _intrude(uid: int, ports, sentinel: str, base: str, extra=None) -> dict:
  """tests/intruder.py as `uid` against `ports`: what answered. `extra`:
  variables added to the environment (root's only)."""
  argv = [sys.executable, '-m', 'tests.intruder',
          '--ports=' + ','.join(map(str, sorted(ports))), f'--sentinel={sentinel}']
  if uid:
    argv = other_user.command(uid, argv, base)
    env = other_user.environment(other_user.home_of(uid, base))
  else:
    env = user_env(extra)
  result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=180, env=env, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  found = json.loads(result.stdout.strip().splitlines()[-1])
  assert found['uid'] == uid
  return found['ports']


@pytest.mark.parametrize('launch_type,launcher_uid,run_key', [
    ('local_mp', 0, 'all'), ('local_mt', 0, ''),
    ('local_mp', other_user.ORDINARY, ''), ('local_mt', other_user.ORDINARY, '')],
    ids=['local_mp-root-run_key_all', 'local_mt-root', 'local_mp-ordinary',
         'local_mt-ordinary'])
def test_another_user_gets_no_answer_from_any_node_while_the_run_reaches_its_budget(
    request, launch_type, launcher_uid, run_key):
  why = other_user.why_not()
  if why:
    pytest.skip(why)
  loopback.ensure()  # Current, so that a launcher of another user needs no build.
  base = other_user.shared_folder()
  request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
  workdir = other_user.home_of(launcher_uid, base)   # The launcher's user's alone.
  home = os.path.join(workdir, 'home')
  os.mkdir(home)
  os.chown(home, launcher_uid, launcher_uid)
  gate = os.path.join(workdir, 'go')
  sentinel = {uid: os.path.join(workdir, f'decoded-for-uid-{uid}')
              for uid in (other_user.NOBODY, launcher_uid)}
  no_key_sentinel = os.path.join(workdir, 'decoded-without-the-key')
  run_dir = os.path.join(workdir, 'run')
  argv = launch_command('--config=smoke', f'--launch_type={launch_type}', TASK,
                        f'--config.max_actor_steps={BUDGET}',
                        f'--workdir={workdir}', '--run_name=run',
                        *([f'--run_key={run_key}'] if run_key else []))
  hold = {faulty_env.HOLD_AT_ENV: str(HOLD_AT_STEP),
          faulty_env.HOLD_UNTIL_ENV: gate}
  if launcher_uid:
    argv = other_user.command(launcher_uid, argv, base)
    env = other_user.environment(home, hold)
  else:
    env = user_env(hold)
  launcher = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
  try:
    def every_node_listening():
      if launcher.poll() is not None or actor_steps(run_dir) <= 0:
        return None
      ports = _listening_ports(launcher.pid)
      return ports if len(ports) >= NODES else None

    ports = wait_for(every_node_listening, 240, 'the held run to listen')
    intruder = _intrude(other_user.NOBODY, ports, sentinel[other_user.NOBODY],
                        base)
    keyed = {}
    if run_key:  # The run's user without the key, then with a node's.
      no_key = _intrude(launcher_uid, ports, no_key_sentinel, base)
      node = node_records(run_dir)['learner/0']['env']
      keyed = {'LD_PRELOAD': loopback.library_path(),
               **{name: node[name] for name in (loopback.RUN_KEY_ENV,
                                                loopback.RUN_PORTS_ENV)}}
    owner = _intrude(launcher_uid, ports, sentinel[launcher_uid], base, keyed)
    held = launcher.poll() is None and actor_steps(run_dir) < BUDGET
    open(gate, 'w').close()
    _, stderr = launcher.communicate(timeout=300)
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()

  assert held, 'the run ended before the checks did: they must see it live'

  # Another user: not one byte, call or decoded object from any port.
  for port, found in intruder.items():
    assert found == {'raw': False, 'methods': None, 'get_variables': False,
                     'get_counts': False, 'server_info': False}, (port, found)
  assert not os.path.exists(sentinel[other_user.NOBODY])
  if run_key:
    # The run's own user without the key: nothing either, from any port;
    # every port listened on is one of the run's, each proving the key.
    for port, found in no_key.items():
      assert found == {'raw': False, 'methods': None, 'get_variables': False,
                       'get_counts': False, 'server_info': False}, (port, found)
    assert not os.path.exists(no_key_sentinel)
    assert keyed[loopback.RUN_KEY_ENV] == loopback.run_key_path(run_dir)
    assert set(ports) <= set(map(int, keyed[loopback.RUN_PORTS_ENV].split(',')))
  # The run's user, after the refusals: every server answers.
  assert all(found['raw'] for found in owner.values()), owner
  methods = [found['methods'] for found in owner.values() if found['methods']]
  assert len(methods) >= NODES - 1, owner  # Courier in every node but replay.
  assert any(found['get_variables'] for found in owner.values()), owner
  assert any(found['get_counts'] for found in owner.values()), owner
  assert any(found['server_info'] for found in owner.values()), owner
  assert os.path.exists(sentinel[launcher_uid])  # The attack itself works.
  # ...and the run went on to its budget.
  assert launcher.returncode == 0, stderr[-3000:]
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached', summary
  assert summary['actor_steps'] >= BUDGET
  assert summary['learner_steps'] > 0
