"""--tracking=mlflow to a real MLflow tracking server, and its UI in a real
browser.

The server is the full `mlflow` package's (`mlflow server`, from the venv
.ci/mlflow_ui.sh makes: the full package does not fit the launcher's lock),
on a loopback port, with a file store and proxied artifacts in the test's
folder. A smoke run logs to it over HTTP; MLflow's client reads the run back
through the server, and Debian's chromium, headless, renders the run's page
(the DOM after the UI's scripts ran, and a screenshot).
"""

import os
import shutil
import signal
import socket
import subprocess
import urllib.request

import pytest

from tests.conftest import REPO_ROOT, read_json, run_launcher, wait_for
from tests.e2e.conftest import tracking_env


MLFLOW = os.path.join(REPO_ROOT, '.venv-mlflow-ui', 'bin', 'mlflow')
CHROMIUM = shutil.which('chromium')


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _answers(url: str) -> bool:
  try:
    with urllib.request.urlopen(url, timeout=2) as response:
      return response.status == 200
  except OSError:
    return False


@pytest.fixture
def mlflow_server(tmp_path):
  """(URL, artifacts folder) of a running `mlflow server` on loopback."""
  if not os.path.exists(MLFLOW) or not CHROMIUM:
    pytest.skip('needs the full mlflow package and chromium: run '
                '`bash .ci/mlflow_ui.sh` (as root, for apt-get)')
  port = _free_port()
  artifacts = tmp_path / 'artifacts'
  with open(tmp_path / 'server.log', 'w') as log:
    server = subprocess.Popen(
        [MLFLOW, 'server', '--host', '127.0.0.1', '--port', str(port),
         '--workers', '1', '--backend-store-uri', f'file:{tmp_path}/store',
         '--artifacts-destination', str(artifacts)],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, 'MLFLOW_ALLOW_FILE_STORE': 'true'},
        start_new_session=True)
  url = f'http://127.0.0.1:{port}'
  try:
    wait_for(lambda: server.poll() is not None or _answers(url + '/health'),
             timeout=120, what='the MLflow server to answer')
    assert server.poll() is None, (tmp_path / 'server.log').read_text()[-2000:]
    yield url, artifacts
  finally:
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


def _chromium(url: str, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run(
      [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu',
       '--hide-scrollbars', '--window-size=1400,1000',
       '--virtual-time-budget=15000', *args, url],
      capture_output=True, text=True, timeout=120, check=False)


def test_run_logs_to_a_tracking_server_and_shows_in_its_ui(mlflow_server,
                                                           workdir, tmp_path):
  url, artifacts = mlflow_server
  result = run_launcher('--config=smoke', '--config.max_actor_steps=2000',
                        f'--workdir={workdir}', '--run_name=served',
                        '--tracking=mlflow', f'--tracking_uri={url}',
                        env=tracking_env(str(tmp_path)))
  assert result.returncode == 0, result.stderr[-2000:]
  state = read_json(os.path.join(workdir, 'served', 'tracking.json'))['mlflow']
  assert state['tracking_uri'] == url

  # Through the server, with MLflow's own client.
  from mlflow import tracking as mlflow_tracking
  client = mlflow_tracking.MlflowClient(tracking_uri=url)
  run = client.get_run(state['run_id'])
  assert run.info.status == 'FINISHED' and run.info.run_name == 'served'
  assert run.data.params['config_name'] == 'smoke'
  assert run.data.tags['summary.exit_reason'] == 'budget_reached'
  for name in ('actor_0/episode_return', 'evaluator_0/episode_return',
               'summary/actor_steps'):
    assert name in run.data.metrics, sorted(run.data.metrics)
  # The artifacts went through the server into its artifacts folder.
  stored = artifacts / state['experiment_id'] / state['run_id'] / 'artifacts'
  assert (stored / 'summary.json').is_file()
  assert (stored / 'plots' / 'eval_return.png').stat().st_size > 0

  # The UI: the run's page as a browser renders it.
  page = f"{url}/#/experiments/{state['experiment_id']}/runs/{state['run_id']}"
  dom = _chromium(page, '--dump-dom')
  assert dom.returncode == 0, dom.stderr[-2000:]
  html = dom.stdout
  assert f"<title>Run {state['run_id']} - MLflow" in html, html[:2000]
  for shown in ('served', 'Finished', 'summary.exit_reason', 'budget_reached',
                'actor_0/episode_return', 'config_name'):
    assert shown in html, shown
  screenshot = tmp_path / 'run_page.png'
  shot = _chromium(page, f'--screenshot={screenshot}')
  assert shot.returncode == 0, shot.stderr[-2000:]
  with open(screenshot, 'rb') as f:
    png = f.read()
  assert png.startswith(b'\x89PNG') and len(png) > 20_000
