"""The Tracker into a real W&B offline run: a sweep point's group, rows
as history steps, read back from the run's .wandb record file."""

import glob
import os

from wandb.proto import wandb_internal_pb2
from wandb.sdk.internal import datastore

from acme_launch import tracking
from acme_launch.tracking import run as tracking_run


def _records(run_dir):
  [path] = glob.glob(os.path.join(run_dir, 'wandb', 'offline-run-*', '*.wandb'))
  store = datastore.DataStore()
  store.open_for_scan(path)
  while True:
    data = store.scan_data()
    if data is None:
      return
    record = wandb_internal_pb2.Record()
    record.ParseFromString(data)
    yield record


def test_a_sweep_point_is_an_offline_run_in_the_sweeps_group(tmp_path,
                                                             wandb_offline):
  run_dir = str(tmp_path / 'grid' / 'seed=1')
  os.makedirs(os.path.join(run_dir, 'metrics'))
  with open(os.path.join(run_dir, 'metrics', 'evaluator_0.csv'), 'w') as f:
    f.write('actor_steps,episode_return,wall_time\n1000,4.5,1.0\n2000,6.0,2.0\n')
  tracker = tracking_run.Tracker(
      run_dir, tracking.Choice(('wandb',), 'tests'), 'seed=1',
      tracking_run.flatten({'config': {'seed': 1}}), group='grid')
  tracker.finish({'exit_reason': 'budget_reached'}, 0)

  records = list(_records(run_dir))
  [run] = [r.run for r in records if r.WhichOneof('record_type') == 'run']
  assert (run.run_group, run.display_name, run.project) == (
      'grid', 'seed=1', 'tests')
  assert 'config.seed' in {item.key for item in run.config.update}
  history = [{(i.key or '/'.join(i.nested_key)): i.value_json
              for i in r.history.item}
             for r in records if r.WhichOneof('record_type') == 'history']
  assert [(h['_step'], h['actor_steps'], h['evaluator_0/episode_return'])
          for h in history] == [('0', '1000', '4.5'), ('1', '2000', '6')]
  state = tracking.read_state(run_dir)
  assert state['wandb']['step'] == 2 and state['wandb']['mode'] == 'offline'
