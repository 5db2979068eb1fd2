"""The Tracker into a real MLflow file store: rows, params, summary, files,
and a second Tracker (a resumed launcher) continuing the same run."""

import os

from mlflow import tracking as mlflow_tracking

from acme_launch import layout
from acme_launch import tracking
from acme_launch.tracking import run as tracking_run


def _metrics_dir(run_dir):
  path = os.path.join(run_dir, 'metrics')
  os.makedirs(path, exist_ok=True)
  return path


def _append(run_dir, name, text):
  with open(os.path.join(_metrics_dir(run_dir), name), 'a') as f:
    f.write(text)


def _client(run_dir):
  state = layout.read_json(tracking.state_path(run_dir))
  # tracking_uri '' is the run directory's own store.
  assert state['mlflow']['tracking_uri'] == ''
  client = mlflow_tracking.MlflowClient(
      tracking_uri='file:' + os.path.join(run_dir, 'mlruns'))
  return client, state['mlflow']['run_id']


def test_rows_params_summary_and_resume_without_duplicates(tmp_path):
  run_dir = str(tmp_path / 'run')
  choice = tracking.Choice(('mlflow',), 'tests')
  params = tracking_run.flatten({'config': {'seed': 3, 'ppo': {'lr': 1e-3}}})
  _append(run_dir, 'actor_0.csv', 'actor_steps,episode_return,wall_time\n'
          '100,-2.0,1700000000.0\n')
  tracker = tracking_run.Tracker(run_dir, choice, 'run', params)
  tracker.update()
  _append(run_dir, 'actor_0.csv', '200,-1.0,1700000001.0\n')
  tracker.finish({'actor_steps': 200, 'exit_reason': 'max_wall_time',
                  'last_eval_return': None}, exit_code=0,
                 files=[])

  client, run_id = _client(run_dir)
  run = client.get_run(run_id)
  assert run.info.status == 'FINISHED' and run.info.run_name == 'run'
  assert run.data.params == {'config.seed': '3', 'config.ppo.lr': '0.001'}
  assert run.data.tags['summary.exit_reason'] == 'max_wall_time'
  assert run.data.metrics['summary/actor_steps'] == 200.0

  # The launcher again (--resume): same run, rows after the last sent.
  _append(run_dir, 'actor_0.csv', '300,0.5,1700000002.0\n')
  again = tracking_run.Tracker(run_dir, choice, 'run', params)
  again.finish(None, exit_code=130)
  history = client.get_metric_history(run_id, 'actor_0/episode_return')
  assert [(m.step, m.value) for m in history] == [
      (100, -2.0), (200, -1.0), (300, 0.5)]
  assert client.get_run(run_id).info.status == 'KILLED'
  assert len(client.search_runs([run.info.experiment_id])) == 1


def test_files_go_to_the_run_as_artifacts(tmp_path):
  run_dir = str(tmp_path / 'run')
  _metrics_dir(run_dir)
  os.makedirs(os.path.join(run_dir, 'plots'))
  plot = os.path.join(run_dir, 'plots', 'eval_return.png')
  with open(plot, 'wb') as f:
    f.write(b'\x89PNG not really')
  layout.write_json_atomic(layout.summary_path(run_dir), {'actor_steps': 1})
  tracker = tracking_run.Tracker(run_dir, tracking.Choice(('mlflow',)), 'run',
                                 {})
  tracker.finish({}, 0, [layout.summary_path(run_dir), plot])
  client, run_id = _client(run_dir)
  assert {a.path for a in client.list_artifacts(run_id)} == {
      'plots', 'summary.json'}
  assert [a.path for a in client.list_artifacts(run_id, 'plots')] == [
      'plots/eval_return.png']


def test_points_of_a_sweep_are_children_of_one_parent_run(tmp_path):
  sweep_dir = tmp_path / 'grid'
  run_ids = []
  for point in ('seed=0', 'seed=1'):
    run_dir = str(sweep_dir / point)
    _metrics_dir(run_dir)
    tracker = tracking_run.Tracker(run_dir, tracking.Choice(('mlflow',)),
                                   point, {}, group='grid')
    tracker.finish({}, 0)
    run_ids.append(layout.read_json(tracking.state_path(run_dir))['mlflow']['run_id'])
  client = mlflow_tracking.MlflowClient(
      tracking_uri=f'file:{sweep_dir}/mlruns')  # One store for the sweep.
  children = [client.get_run(i) for i in run_ids]
  parents = {run.data.tags['mlflow.parentRunId'] for run in children}
  assert len(parents) == 1
  parent = client.get_run(parents.pop())
  assert parent.info.run_name == 'grid'
  assert [run.info.run_name for run in children] == ['seed=0', 'seed=1']


def test_a_tracker_that_cannot_open_its_run_is_one_warning(tmp_path, capsys):
  run_dir = str(tmp_path / 'run')
  _append(run_dir, 'actor_0.csv', 'actor_steps,wall_time\n100,1.0\n')
  layout.write_json_atomic(tracking.state_path(run_dir), {
      'backends': ['mlflow'], 'mlflow': {'run_id': 'no-such-run'}})
  tracker = tracking_run.Tracker(run_dir, tracking.Choice(('mlflow',)), 'run',
                                 {})
  assert tracker.describe() == []
  assert tracker.poll() == 1  # The rows are still read, and go nowhere.
  tracker.finish({}, 0)
  [line] = capsys.readouterr().err.strip().splitlines()
  assert line.startswith('acme-launch: warning: --tracking=mlflow: cannot '
                         'open its run')
