"""`python -m acme_launch.evaluate` on a real run: the smoke run the e2e
tests share (`trained`, tests/e2e/conftest.py), copied first.

As a user runs it (its own process): its newest learner checkpoint, played
with the final evaluation's seeds, gives the final evaluation's episodes
return for return, and the figures land in a new file under evaluations/
with the rest of the run directory unchanged. Then, in this process
(acme_launch.evaluate.main, what the command runs): other seeds, the
sampling policy, a setting overridden; and bad input, one line, exit 2,
nothing written.

That run films the first episode of its first evaluation and of its final
one (config.eval_video_every, tests/e2e/conftest.py VIDEO): the final
evaluation replayed unfilmed here gives its returns, so filming changed
none; its videos and TensorBoard animations are read here, what the
trackers got in test_tracking.py.
"""

import csv
import glob
import os
import shutil
import struct
import subprocess
import sys

import pytest

from acme_launch.testing.launcher import checkout_on_path
from tests.conftest import REPO_ROOT, read_json, user_env


def _tree(run_dir):
  """Every file of the run directory with its size and mtime."""
  files = {}
  for folder, _, names in os.walk(run_dir):
    for name in names:
      path = os.path.join(folder, name)
      stat = os.lstat(path)
      files[os.path.relpath(path, run_dir)] = (stat.st_size, stat.st_mtime_ns)
  return files


@pytest.fixture
def run_dir(trained, tmp_path):
  copy = str(tmp_path / 'run')
  shutil.copytree(trained, copy)
  return copy


def test_the_final_evaluation_is_replayed_episode_for_episode(run_dir):
  before = _tree(run_dir)
  result = subprocess.run(
      [sys.executable, '-m', 'acme_launch.evaluate', run_dir], cwd=REPO_ROOT,
      capture_output=True, text=True, timeout=300,
      env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  [written] = os.listdir(os.path.join(run_dir, 'evaluations'))
  evaluated = read_json(os.path.join(run_dir, 'evaluations', written))
  assert evaluated['returns'] == final['returns']
  assert evaluated['lengths'] == final['lengths']
  assert evaluated['final_eval_seeds'] and evaluated['policy'] == 'deterministic'
  # The driver records how the final evaluation drew its seeds: consecutive
  # ones (program/build.py), which one EnvPool plays.
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['final_eval_seeds'] == 'consecutive'
  first = evaluated['seeds'][0]
  assert evaluated['seeds'] == list(range(first, first + 10))
  # One line per episode, then the summary in a run's words, with the IQM
  # and its interval at 10 episodes.
  lines = result.stdout.splitlines()
  assert sum(l.startswith('episode ') for l in lines) == final['episodes'] == 10
  assert any(l.startswith(f'eval return        {final["return_mean"]:.1f} +- ')
             for l in lines), result.stdout
  assert any(l.startswith('eval spread        median ') for l in lines)
  assert any(l.startswith('eval IQM ') and '[' in l for l in lines)
  assert evaluated['return_iqm']['low'] <= evaluated['return_iqm']['value']
  # Nothing the run wrote was touched.
  after = _tree(run_dir)
  assert {k: v for k, v in after.items()
          if not k.startswith('evaluations')} == before


def _rows(run_dir, stem):
  with open(os.path.join(run_dir, 'metrics', f'{stem}.csv'), newline='') as f:
    return list(csv.DictReader(f))


def _events(path):
  """A TensorBoard event file's events (TFRecord framing: a length, its
  CRC, the record, its CRC), read without importing TensorFlow."""
  from tensorboard.compat.proto import event_pb2
  with open(path, 'rb') as f:
    data = f.read()
  offset = 0
  while offset < len(data):
    (length,) = struct.unpack_from('<Q', data, offset)
    yield event_pb2.Event.FromString(data[offset + 12:offset + 12 + length])
    offset += 12 + length + 4


def test_the_run_filmed_its_first_and_final_evaluations(trained):
  from tests.use.video_stream import video_stream
  final = read_json(os.path.join(trained, 'final_eval.json'))
  [first] = [r for r in _rows(trained, 'evaluator_0')
             if int(float(r['actor_steps'])) == 0]
  videos = os.path.join(trained, 'videos')
  assert sorted(os.listdir(videos)) == [
      'evaluator_0-0.mp4', f'final-{final["actor_steps"]}.mp4']
  # The first episode of each, from its reset: a frame more than its steps.
  assert video_stream(os.path.join(videos, 'evaluator_0-0.mp4')) == (
      'h264', 'yuv420p', 64, 64, int(float(first['episode_length'])) + 1)
  assert video_stream(os.path.join(
      videos, f'final-{final["actor_steps"]}.mp4')) == (
          'h264', 'yuv420p', 64, 64, final['lengths'][0] + 1)
  # TensorBoard: each as an animated GIF at its actor steps, small.
  animations = {}
  for path in glob.glob(os.path.join(trained, 'metrics', 'tensorboard',
                                     'evaluator_0', 'events.*')):
    for event in _events(path):
      for value in event.summary.value:
        if value.tag.startswith('video/'):
          animations[value.tag] = (event.step, value.image)
  assert sorted(animations) == ['video/evaluation', 'video/final']
  assert animations['video/evaluation'][0] == 0
  assert animations['video/final'][0] == final['actor_steps']
  for _, image in animations.values():
    assert image.encoded_image_string[:6] == b'GIF89a'
    assert (image.height, image.width) == (64, 64)
    assert len(image.encoded_image_string) < 200_000


def _main(*args):
  from acme_launch import evaluate
  return evaluate.main(list(args))


def test_other_seeds_the_sampling_policy_and_an_override(run_dir, capsys):
  final = read_json(os.path.join(run_dir, 'final_eval.json'))
  assert _main(run_dir, '--episodes=3', '--seed=5', '--sample',
               '--config.env_max_episode_steps=20') == 0
  out = capsys.readouterr().out
  assert 'sampling policy' in out
  [written] = os.listdir(os.path.join(run_dir, 'evaluations'))
  evaluated = read_json(os.path.join(run_dir, 'evaluations', written))
  assert evaluated['lengths'] == [20, 20, 20]
  assert evaluated['return_iqm'] is None  # Under 10 episodes: none.
  assert evaluated['returns'] != final['returns'][:3]
  # A second evaluation is a second file, the first kept.
  assert _main(run_dir, '--episodes=1', '--checkpoint=ckpt-1') == 0
  assert len(os.listdir(os.path.join(run_dir, 'evaluations'))) == 2


def _cut_short(run_dir):
  learner = os.path.join(run_dir, 'checkpoints', 'learner')
  [data] = sorted(n for n in os.listdir(learner) if '.data-' in n and
                  os.path.getsize(os.path.join(learner, n)) > 100)[-1:]
  path = os.path.join(learner, data)
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def _no_checkpoint(run_dir):
  shutil.rmtree(os.path.join(run_dir, 'checkpoints', 'learner'))


@pytest.mark.parametrize('damage, args, message', [
    (None, ('--env_name=Hopper-v4',), 'cannot evaluate on Hopper-v4: its '
     'observations are'),
    (None, ('--config.network.normalize_observations=True',),
     'does not fit config.agent '
     'ppo'),
    (None, ('--checkpoint=ckpt-99',), 'no learner checkpoint'),
    (None, ('--episodes=-1',), '--episodes must be 1 or more'),
    (None, ('--config.no_such_field=1',), 'no_such_field'),
    (_no_checkpoint, (), 'has no learner checkpoint yet'),
    (_cut_short, (), 'does not read'),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    run_dir, capsys, damage, args, message):
  if damage:
    damage(run_dir)
  before = _tree(run_dir)
  assert _main(run_dir, *args) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith('acme-launch evaluate: error: ')
  assert message in err[0], err
  assert _tree(run_dir) == before


def test_a_folder_that_is_no_run_is_one_line_exit_2(tmp_path, capsys):
  assert _main(str(tmp_path)) == 2
  [line] = capsys.readouterr().err.strip().splitlines()
  assert 'is not a run directory' in line
  assert os.listdir(tmp_path) == []


def test_video_films_mujoco_off_screen_and_the_returns_stay_the_same(
    run_dir):
  """--video as a user runs it: the GL choice is made before MuJoCo is
  imported, in a process of its own. The first episode filmed (30 steps:
  31 frames, H.264 yuv420p, 480 x 480), both played as without video."""
  from tests.use.video_stream import video_stream
  short = ('--episodes=2', '--config.env_max_episode_steps=30')
  assert _main(run_dir, *short) == 0
  [plain] = os.listdir(os.path.join(run_dir, 'evaluations'))
  result = subprocess.run(
      [sys.executable, '-m', 'acme_launch.evaluate', run_dir, *short,
       '--video', '--video_episodes=1'], cwd=REPO_ROOT, capture_output=True,
      text=True, timeout=300, env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  [filmed] = [n for n in os.listdir(os.path.join(run_dir, 'evaluations'))
              if n.endswith('.json') and n != plain]
  filmed = read_json(os.path.join(run_dir, 'evaluations', filmed))
  assert filmed['returns'] == read_json(
      os.path.join(run_dir, 'evaluations', plain))['returns']
  assert filmed['videos'], result.stdout[-2000:] + result.stderr[-2000:]
  [path] = filmed['videos']
  assert path.endswith('episode_0.mp4') and f'video              {path}' in (
      result.stdout)
  assert video_stream(path) == ('h264', 'yuv420p', 480, 480, 31)
  assert 'Traceback' not in result.stderr, result.stderr[-2000:]
