"""The evaluator's videos (videos/*.mp4, config.eval_video_every) to the
trackers: a real MLflow file store (an artifact under videos/) and a real
W&B offline run (a `wandb.Video` in its history), each complete video
once, a file still being written (a hidden name) not yet, and a second
Tracker (a resumed launcher) sending only the videos it lacks. The
evaluator's TensorBoard animation: tests/e2e/test_evaluate.py."""

import glob
import json
import os

from mlflow import tracking as mlflow_tracking
import numpy as np
from wandb.proto import wandb_internal_pb2
from wandb.sdk.internal import datastore

from acme_launch import layout
from acme_launch import tracking
from acme_launch.envs import video
from acme_launch.tracking import run as tracking_run


def _film(path):
  clip = video.Mp4(path, fps=10)
  for shade in (0, 120, 240):
    clip.add(np.full((16, 16, 3), shade, np.uint8))
  clip.close()


def _wandb_videos(run_dir):
  """(W&B step, key, actor steps, media type, file) of each video logged,
  from each offline run folder's records (a resumed run adds a folder)."""
  found = []
  for path in sorted(glob.glob(os.path.join(run_dir, 'wandb', 'offline-run-*',
                                            '*.wandb'))):
    store = datastore.DataStore()
    store.open_for_scan(path)
    while (data := store.scan_data()) is not None:
      record = wandb_internal_pb2.Record()
      record.ParseFromString(data)
      if record.WhichOneof('record_type') != 'history':
        continue
      items = {(i.key or '/'.join(i.nested_key)): json.loads(i.value_json)
               for i in record.history.item}
      for key in sorted(k[:-len('/_type')] for k in items
                        if k.startswith('video/') and k.endswith('/_type')):
        found.append((items['_step'], key, items['actor_steps'],
                      items[f'{key}/_type'], items[f'{key}/path']))
  return found


def test_each_complete_video_goes_to_mlflow_and_wandb_once(tmp_path,
                                                          wandb_offline):
  run_dir = str(tmp_path / 'run')
  videos = layout.videos_dir(run_dir)
  os.makedirs(videos)
  _film(os.path.join(videos, 'evaluator_0-0.mp4'))
  _film(os.path.join(videos, '.evaluator_0-1000.mp4'))  # Being written.
  choice = tracking.Choice(('wandb', 'mlflow'), 'tests')
  tracker = tracking_run.Tracker(run_dir, choice, 'run', {})
  tracker.poll()
  tracker.poll()  # Nothing new: nothing sent twice.
  assert tracking.read_state(run_dir)['videos'] == ['evaluator_0-0.mp4']
  # Complete now, and the final evaluation's: sent by the next launcher.
  os.replace(os.path.join(videos, '.evaluator_0-1000.mp4'),
             os.path.join(videos, 'evaluator_0-1000.mp4'))
  _film(os.path.join(videos, 'final-3000.mp4'))
  tracker.finish(None, 0)
  again = tracking_run.Tracker(run_dir, choice, 'run', {})
  again.finish(None, 0)

  state = tracking.read_state(run_dir)
  assert state['videos'] == ['evaluator_0-0.mp4', 'evaluator_0-1000.mp4',
                             'final-3000.mp4']
  client = mlflow_tracking.MlflowClient(
      tracking_uri='file:' + os.path.join(run_dir, 'mlruns'))
  artifacts = client.list_artifacts(state['mlflow']['run_id'], 'videos')
  assert sorted((a.path, a.file_size) for a in artifacts) == [
      (f'videos/{n}', os.path.getsize(os.path.join(videos, n)))
      for n in state['videos']]
  logged = _wandb_videos(run_dir)
  assert [(key, steps, kind) for _, key, steps, kind, _ in logged] == [
      ('video/evaluator_0', 0, 'video-file'),
      ('video/evaluator_0', 1000, 'video-file'),
      ('video/final', 3000, 'video-file')]
  assert [step for step, *_ in logged] == [0, 1, 2]
  assert all(path.endswith('.mp4') for *_, path in logged)
