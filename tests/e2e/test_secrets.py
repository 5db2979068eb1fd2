"""Credentials stay out of the run directory, the output and the nodes.

One tracked `smoke` run (W&B offline, MLflow over HTTP) whose MLflow URI
holds a password, to a server on loopback that refuses every call without
it (acme_launch/testing/mlflow_server.py), with credentials in the
launcher's environment; while it runs, every node's environment as the
kernel holds it (/proc/PID/environ) and, in the processes that make
environments, as Python sees it (a module of the config's, named in
config.env_modules, records the variable names). Then its resume: without
the URI, one line and exit 2; with it in MLFLOW_TRACKING_URI, on to a
larger budget in the same MLflow run. No traffic leaves loopback.
"""

import json
import os
import subprocess
import textwrap
import time

import pytest

from acme_launch.testing.launcher import LiveOutput, launch_command
from acme_launch.testing.mlflow_server import MlflowServer
from tests.conftest import (REPO_ROOT, killed_on_exit, node_records, read_json,
                            run_launcher, user_env, wait_for)
from tests.e2e.conftest import tracking_env

PASSWORD = 'pw-c0ffee-5ecret'
MARK = 'leak-7f3a91'  # In every secret's value below.
SECRETS = {
    'WANDB_API_KEY': MARK + '0' * (40 - len(MARK)),
    'AWS_SECRET_ACCESS_KEY': 'aws-' + MARK,
    'HF_TOKEN': 'hf-' + MARK,
    'ACME_TEST_PROXY': f'http://bob:{MARK}@127.0.0.1:9',  # By its value.
    'ACME_TEST_PASSED_TOKEN': 'passed-' + MARK,            # pass_env: actors.
}
BUDGET_A, BUDGET_B = 3000, 4500
NODES = 5  # smoke: replay, counter, learner, actor, evaluator.

CONFIG = '''
from acme_launch.configs import smoke


def get_config():
  config = smoke.get_config()
  config.max_actor_steps = {budget}
  config.env_modules = ('envprobe',)
  config.resources.actor.pass_env = 'ACME_TEST_PASSED_TOKEN'
  return config
'''
PROBE = '''
"""Records the names (never values) of the variables this process sees."""
import json
import os

_folder = os.environ.get('ACME_TEST_PROBE_DIR')
if _folder:
  _node = os.environ.get('ACME_LAUNCH_NODE', 'launcher').replace('/', '_')
  with open(os.path.join(_folder, f'{_node}-{os.getpid()}.json'), 'w') as f:
    json.dump(sorted(os.environ), f)
'''


def _environ(pid: int) -> bytes:
  with open(f'/proc/{pid}/environ', 'rb') as f:
    return f.read()


def _leaks(folder: str):
  """([(path, secret) of each file under `folder` holding a secret],
  how many files were read)."""
  leaks, files = [], 0
  for parent, _, names in os.walk(folder):
    for name in names:
      with open(os.path.join(parent, name), 'rb') as f:
        data = f.read()
      files += 1
      leaks += [(os.path.join(parent, name), secret)
                for secret in (PASSWORD, MARK) if secret.encode() in data]
  return leaks, files


def _env(home, **extra) -> dict:
  return {**tracking_env(str(home / 'wandb-home')), **SECRETS,
          'ACME_TEST_PROBE_DIR': str(home / 'probe'), **extra}


@pytest.fixture(scope='module')
def tracked(tmp_path_factory):
  """Everything the tests read: the server, the run directory, every
  launch's (exit code, stdout, stderr), node environments and probes."""
  home = tmp_path_factory.mktemp('secrets')
  (home / 'code').mkdir()
  (home / 'probe').mkdir()
  (home / 'code' / 'secret_smoke.py').write_text(
      textwrap.dedent(CONFIG.format(budget=BUDGET_A)))
  (home / 'code' / 'envprobe.py').write_text(textwrap.dedent(PROBE))
  server = MlflowServer(str(home / 'server-store'), 'alice', PASSWORD)
  run_dir = str(home / 'runs' / 'run')
  started = time.monotonic()
  launcher = subprocess.Popen(
      launch_command(f'--config={home / "code" / "secret_smoke.py"}',
                     f'--workdir={home / "runs"}', '--run_name=run',
                     '--tracking=wandb,mlflow',
                     f'--tracking_uri={server.uri}'),
      cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, env=user_env(_env(home)))
  environs = {}
  with killed_on_exit(launcher):
    output = LiveOutput(launcher)
    records = wait_for(
        lambda: len(node_records(run_dir)) == NODES and node_records(run_dir),
        120, 'every node recorded')
    for node, record in records.items():
      environs[node] = _environ(record['pid'])
      if record['parent_pid'] != launcher.pid:  # The fork server.
        environs['forkserver'] = _environ(record['parent_pid'])
    stderr = output.wait(300)
  launches = [(launcher.returncode, output.text(), stderr)]
  seconds = [time.monotonic() - started]
  # Before the resume rewrites config.json.
  scans = [_leaks(str(home / 'runs'))]
  first_argv = read_json(os.path.join(run_dir, 'config.json'))['argv']
  try:
    without = run_launcher(f'--resume={run_dir}', env=_env(home))
    seconds.append(time.monotonic() - started - sum(seconds))
    resumed = run_launcher(
        f'--resume={run_dir}', f'--config.max_actor_steps={BUDGET_B}',
        env=_env(home, MLFLOW_TRACKING_URI=server.uri))
  finally:
    server.stop()
  launches += [(r.returncode, r.stdout, r.stderr) for r in (without, resumed)]
  seconds.append(time.monotonic() - started - sum(seconds))
  print(f'launches took {", ".join(f"{t:.1f}" for t in seconds)} s')
  scans.append(_leaks(str(home / 'runs')))
  yield {'home': home, 'run_dir': run_dir, 'server': server,
         'launches': launches, 'environs': environs, 'scans': scans,
         'first_argv': first_argv}


def test_no_password_or_secret_in_any_file_of_the_run_or_any_output(tracked):
  first, without, resumed = tracked['launches']
  assert first[0] == 0, first[2][-2000:]
  assert resumed[0] == 0, resumed[2][-2000:]
  masked = 'http://alice:***@127.0.0.1'
  assert 'tracking to mlflow run' in first[1] and masked in first[1]
  for _, stdout, stderr in tracked['launches']:
    for secret in (PASSWORD, MARK):
      assert secret not in stdout and secret not in stderr
  for leaks, files in tracked['scans']:  # After the first run, at the end.
    assert leaks == []
    assert files > 30  # Checkpoints, logs, metrics, W&B's offline run...
  assert any(arg.startswith(f'--tracking_uri={masked}')
             for arg in tracked['first_argv'])
  state = read_json(os.path.join(tracked['run_dir'], 'tracking.json'))
  assert state['mlflow']['tracking_uri'].startswith(masked)


def test_nodes_inherit_no_credentials_but_those_their_config_passes(tracked):
  environs = tracked['environs']
  assert set(environs) >= {'replay/0', 'counter/0', 'learner/0', 'actor/0',
                           'evaluator/0'}
  for node, environ in environs.items():
    names = {entry.split(b'=', 1)[0].decode()
             for entry in environ.split(b'\0') if entry}
    assert not names & {'WANDB_API_KEY', 'WANDB_MODE', 'MLFLOW_TRACKING_URI',
                        'AWS_SECRET_ACCESS_KEY', 'HF_TOKEN', 'ACME_TEST_PROXY'}
    assert MARK.encode() not in environ.replace(
        SECRETS['ACME_TEST_PASSED_TOKEN'].encode(), b''), node
    assert PASSWORD.encode() not in environ, node
  # As Python sees it in the nodes that make environments; the launcher had
  # them all.
  seen = {}
  for name in os.listdir(tracked['home'] / 'probe'):
    with open(tracked['home'] / 'probe' / name) as f:
      seen.setdefault(name.rsplit('-', 1)[0], set()).update(json.load(f))
  assert set(SECRETS) <= seen['launcher']
  assert seen['actor_0'] & set(SECRETS) == {'ACME_TEST_PASSED_TOKEN'}
  assert seen['evaluator_0'] & set(SECRETS) == set()


def test_resume_asks_for_the_credentials_again_and_tracks_on(tracked):
  _, without, resumed = tracked['launches']
  assert without[0] == 2
  [line] = without[2].strip().splitlines()
  assert 'http://alice:***@127.0.0.1' in line
  assert '--tracking_uri or MLFLOW_TRACKING_URI' in line
  assert resumed[0] == 0, resumed[2][-2000:]
  server = tracked['server']
  assert server.refused == 0  # Every call carried the password.
  state = read_json(os.path.join(tracked['run_dir'], 'tracking.json'))
  store = server.store
  run = store.get_run(state['mlflow']['run_id'])
  assert run.info.status == 'FINISHED'
  assert len(store.search_runs([run.info.experiment_id], '', 1)) == 1
  assert run.data.metrics['summary/actor_steps'] >= BUDGET_B
  assert run.data.params['config.max_actor_steps'] == str(BUDGET_A)
