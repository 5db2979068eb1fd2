"""--tracking=wandb,mlflow on real runs, read back with each tracker's own
reader: MLflow's client on the run directory's file store, W&B's offline
run files (its .wandb record log, which `wandb sync` uploads).

The runs are the session's `trained` and `resumed` (tests/e2e/conftest.py),
made with W&B offline; the bad-input tests start nothing.
"""

import csv
import glob
import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, read_json, run_launcher, user_env
from tests.e2e.conftest import BUDGET_A, BUDGET_B, tracking_env



def _csv_rows(run_dir, stem):
  with open(os.path.join(run_dir, 'metrics', f'{stem}.csv'), newline='') as f:
    return list(csv.DictReader(f))


def _all_csv_rows(run_dir):
  return sum(len(_csv_rows(run_dir, os.path.basename(p)[:-4]))
             for p in glob.glob(os.path.join(run_dir, 'metrics', '*.csv')))


def _videos(run_dir):
  """The evaluator's videos (the smoke runs film some: conftest.VIDEO),
  each one W&B step as a row is."""
  return len(os.listdir(os.path.join(run_dir, 'videos')))


def _mlflow(run_dir):
  """(client, run) of the run directory's MLflow run."""
  os.environ['MLFLOW_ALLOW_FILE_STORE'] = 'true'  # MLflow 3's file store.
  from mlflow import tracking as mlflow_tracking
  state = read_json(os.path.join(run_dir, 'tracking.json'))
  client = mlflow_tracking.MlflowClient(
      tracking_uri='file:' + os.path.join(run_dir, 'mlruns'))
  return client, client.get_run(state['mlflow']['run_id'])


def _wandb_runs(run_dir):
  """Each offline run folder's records, oldest first: run id, group,
  config keys, history (step, {key: value}), summary, saved files."""
  from wandb.proto import wandb_internal_pb2
  from wandb.sdk.internal import datastore
  runs = []
  for path in sorted(glob.glob(os.path.join(run_dir, 'wandb', 'offline-run-*',
                                            '*.wandb'))):
    run = {'history': [], 'summary': {}, 'files': [], 'config': set()}
    store = datastore.DataStore()
    store.open_for_scan(path)
    while True:
      data = store.scan_data()
      if data is None:
        break
      record = wandb_internal_pb2.Record()
      record.ParseFromString(data)
      kind = record.WhichOneof('record_type')
      if kind == 'run':
        run['id'], run['group'] = record.run.run_id, record.run.run_group
        run['config'] |= {i.key for i in record.run.config.update}
      elif kind == 'history':
        items = {(i.key or '/'.join(i.nested_key)): i.value_json
                 for i in record.history.item}
        run['history'].append((record.history.step.num, items))
      elif kind == 'summary':
        run['summary'].update({i.key: i.value_json
                               for i in record.summary.update if i.key})
      elif kind == 'files':
        run['files'] += [f.path for f in record.files.files]
    runs.append(run)
  return runs


def test_mlflow_run_has_node_metrics_config_summary_and_plots(trained):
  client, run = _mlflow(trained)
  assert run.info.status == 'FINISHED' and run.info.run_name == 'run'
  metrics = run.data.metrics
  for name in ('actor_0/episode_return', 'evaluator_0/episode_return',
               'learner_0/learner_steps', 'progress/actor_steps'):
    assert name in metrics, sorted(metrics)
  # Every actor row, stepped by its actor_steps, values as in the CSV.
  history = client.get_metric_history(run.info.run_id, 'actor_0/episode_return')
  assert [(m.step, m.value) for m in history] == [
      (int(float(r['actor_steps'])), pytest.approx(float(r['episode_return'])))
      for r in _csv_rows(trained, 'actor_0')]
  assert run.data.params['config.max_actor_steps'] == str(BUDGET_A)
  assert run.data.params['config_name'] == 'smoke'
  summary = read_json(os.path.join(trained, 'summary.json'))
  assert metrics['summary/actor_steps'] == summary['actor_steps'] >= BUDGET_A
  assert run.data.tags['summary.exit_reason'] == 'budget_reached'
  artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
  assert artifacts == {'plots', 'summary.json', 'videos'}
  videos = {a.path for a in client.list_artifacts(run.info.run_id, 'videos')}
  assert videos == {f'videos/{name}' for name in
                    os.listdir(os.path.join(trained, 'videos'))}
  plots = {a.path for a in client.list_artifacts(run.info.run_id, 'plots')}
  assert plots == {'plots/eval_return.png', 'plots/steps_per_second.png'}


def test_wandb_offline_run_has_every_row_the_config_and_summary(trained):
  [run] = _wandb_runs(trained)
  assert run['id'] == read_json(os.path.join(trained, 'tracking.json'))['wandb']['run_id']
  assert 'config.max_actor_steps' in run['config']
  steps = [step for step, _ in run['history']]
  # A log call per row and per video.
  assert steps == list(range(_all_csv_rows(trained) + _videos(trained)))
  evaluations = [(float(items['actor_steps']),
                  float(items['evaluator_0/episode_return']))
                 for _, items in run['history']
                 if 'evaluator_0/episode_return' in items]
  assert evaluations == [
      (float(r['actor_steps']), pytest.approx(float(r['episode_return'])))
      for r in _csv_rows(trained, 'evaluator_0')]
  assert run['summary']['exit_reason'] == '"budget_reached"'
  assert {'summary.json', 'plots/eval_return.png'} <= set(run['files'])


def test_resume_continues_both_runs_without_sending_rows_twice(resumed):
  run_dir, _, _, result = resumed
  assert result.returncode == 0, result.stderr[-2000:]
  state = read_json(os.path.join(run_dir, 'tracking.json'))
  assert f"wandb offline run {state['wandb']['run_id']}" in result.stdout

  client, run = _mlflow(run_dir)
  assert len(client.search_runs([run.info.experiment_id])) == 1
  history = client.get_metric_history(run.info.run_id, 'evaluator_0/episode_return')
  steps = [m.step for m in history]
  assert steps == [int(float(r['actor_steps']))
                   for r in _csv_rows(run_dir, 'evaluator_0')]
  assert len(set(steps)) == len(steps) and max(steps) >= BUDGET_A
  assert run.data.metrics['summary/actor_steps'] >= BUDGET_B

  first, second = _wandb_runs(run_dir)  # The same run id, twice.
  assert first['id'] == second['id'] == state['wandb']['run_id']
  steps = [s for s, _ in first['history']] + [s for s, _ in second['history']]
  assert steps == list(range(_all_csv_rows(run_dir) + _videos(run_dir)))
  assert second['summary']['restored_actor_steps'] == str(
      read_json(os.path.join(run_dir, 'summary.json'))['restored_actor_steps'])


def test_unknown_tracking_backend_is_one_line_and_exit_2(workdir):
  result = run_launcher('--config=smoke', '--tracking=wandb,neptune',
                        f'--workdir={workdir}')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      "acme-launch: error: --tracking: unknown backend 'neptune'; choose "
      'from tensorboard, wandb, mlflow (comma-separated)']
  assert os.listdir(workdir) == []


def test_tracker_package_not_installed_is_one_line_and_exit_2(workdir):
  # The launcher as is, in a Python where `import wandb` fails.
  hide = ("import runpy, sys; sys.modules['wandb'] = None; "
          f"sys.argv = ['launch.py'] + sys.argv[1:]; "
          f"runpy.run_path({os.path.join(REPO_ROOT, 'launch.py')!r}, "
          "run_name='__main__')")
  result = subprocess.run(
      [sys.executable, '-c', hide, '--config=smoke', '--tracking=wandb',
       f'--workdir={workdir}'], cwd=REPO_ROOT, capture_output=True,
      text=True, env=user_env(tracking_env(os.path.dirname(workdir))),
      timeout=120, check=False)
  assert result.returncode == 2, result.stderr[-2000:]
  [line] = result.stderr.strip().splitlines()
  assert line.startswith('acme-launch: error: --tracking=wandb: the wandb '
                         'package is not installed here')
  assert 'pip install -e ".[wandb]"' in line
  assert os.listdir(workdir) == []


def test_unreachable_mlflow_server_is_one_line_and_exit_2(workdir):
  with socket.socket() as s:  # A loopback port nobody listens on.
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  result = run_launcher('--config=smoke', '--tracking=mlflow',
                        f'--tracking_uri=http://127.0.0.1:{port}',
                        f'--workdir={workdir}',
                        env=tracking_env(os.path.dirname(workdir)))
  assert result.returncode == 2
  [line] = result.stderr.strip().splitlines()
  assert f'MLflow tracking server http://127.0.0.1:{port} does not answer' in line
  assert os.listdir(workdir) == []
