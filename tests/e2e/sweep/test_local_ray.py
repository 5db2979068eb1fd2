"""The sweep's own Ray instance (acme_launch/sweep/local_ray.py), which Ray
Tune's trials run in, tried as an attacker on this host would: another user
(`nobody`) sends HTTP/2 to every port its processes listen on and joins it
as a Ray driver to run a task, as works against a plain `ray start --head`.
Nothing may answer them; its own user gets answers on the same ports."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from tests import other_user
from tests.conftest import REPO_ROOT, user_env

# A local Ray instance in a process of its own, printing what it is.
_INSTANCE = '''
import json, sys
import ray
from acme_launch.sweep import local_ray
with local_ray.started(1) as instance:
  print(json.dumps({'folder': instance.folder,
                    'gcs': ray.get_runtime_context().gcs_address,
                    'screened': instance.screened,
                    'seconds': instance.start_seconds}), flush=True)
  sys.stdin.read()
'''


def _as(uid: int, argv, base: str, extra=None) -> dict:
  if uid:
    argv = other_user.command(uid, argv, base)
    env = other_user.environment(other_user.home_of(uid, base), extra)
  else:
    env = user_env(extra)
  result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=180, env=env, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  found = json.loads(result.stdout.strip().splitlines()[-1])
  assert found['uid'] == uid
  return found


def test_another_user_gets_no_answer_from_the_sweeps_ray_and_runs_no_task(
    request):
  why = other_user.why_not()
  if why:
    pytest.skip(why)
  base = other_user.shared_folder()
  request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
  sentinel = {uid: os.path.join(base, f'task-of-uid-{uid}')
              for uid in (other_user.NOBODY, 0)}
  instance = subprocess.Popen(
      [sys.executable, '-c', _INSTANCE], cwd=REPO_ROOT, env=user_env(),
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    facts = json.loads(instance.stdout.readline())
    listeners = other_user.listeners(instance.pid)
    ports = sorted({port for _, port in listeners})
    host = facts['gcs'].rsplit(':', 1)[0]
    raw = [sys.executable, '-m', 'tests.intruder',
           '--ports=' + ','.join(map(str, ports)), f'--host={host}']
    intruder = _as(other_user.NOBODY,
                   raw + [f'--sentinel={sentinel[other_user.NOBODY]}'], base)
    owner = _as(0, raw + [f'--sentinel={sentinel[0]}'], base)
    join = [sys.executable, '-m', 'tests.ray_intruder',
            f'--address={facts["gcs"]}']
    outsider = _as(other_user.NOBODY,
                   join + [f'--sentinel={sentinel[other_user.NOBODY]}'], base)
    # Ray itself asks a token too where its user has one (~/.ray/auth_token,
    # written by a local ray.init): a driver of that user sends it when
    # told to. Another user has no such file to send.
    token = ({'RAY_AUTH_MODE': 'token'} if os.path.isfile(
        os.path.expanduser('~/.ray/auth_token')) else {})
    outsider_told = _as(other_user.NOBODY, join + [
        f'--sentinel={sentinel[other_user.NOBODY]}'], base, token)
    insider = _as(0, join + [f'--sentinel={sentinel[0]}'], base, token)
    folder_mode = stat.S_IMODE(os.stat(facts['folder']).st_mode)
  finally:
    instance.communicate('', timeout=120)

  assert facts['screened']
  # Ray's processes listen on this host's address alone: no wildcard, no
  # Ray Client server (10001), no dashboard (8265).
  assert listeners and all(ip.replace('::ffff:', '') == host
                           for ip, _ in listeners), listeners
  assert not {10001, 8265} & set(ports)
  # Another user: not a byte from any port, no join, no task.
  assert all(not found['raw'] for found in intruder['ports'].values()), (
      intruder)
  for attempt in (outsider, outsider_told):
    assert not attempt['joined'] and not attempt['task_ran'], attempt
  assert not os.path.exists(sentinel[other_user.NOBODY])
  # Its own user: the same ports answer, and the same join runs a task.
  assert any(found['raw'] for found in owner['ports'].values()), owner
  assert insider['task_ran'] and os.path.exists(sentinel[0]), insider
  # Its session files are in a folder no one else may enter, gone after.
  assert folder_mode == 0o700
  assert not os.path.exists(facts['folder'])
