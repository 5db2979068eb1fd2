"""acme_launch.use.video in this process, where no OpenGL is needed: the
mp4 files (H.264, yuv420p, even sizes, one frame at a time), MinAtar's grid
and Atari's screen as frames, a filmed episode's returns unchanged, and a
machine without off-screen OpenGL (the evaluation plays on, one line says
which packages). MuJoCo's off-screen frames need the GL choice made before
MuJoCo is imported, so they are tested in a process of their own, as a user
runs `--video` (tests/e2e/test_evaluate.py).
"""

import os
import re
import subprocess

import imageio_ffmpeg
import numpy as np

from acme_launch import envs as environments
from acme_launch.use import evaluate
from acme_launch.use import video
from tests.use.test_evaluate import _run_dir


def video_stream(path: str):
  """(codec, pixel format, width, height, frames) of an mp4, from ffmpeg."""
  result = subprocess.run(
      [imageio_ffmpeg.get_ffmpeg_exe(), '-i', path, '-map', '0:v', '-f',
       'null', '-'], capture_output=True, text=True, check=False)
  stream = re.search(r'Video: (\w+).*?, (\w+)\(.*?(\d+)x(\d+)', result.stderr)
  frames = re.findall(r'frame=\s*(\d+)', result.stderr)
  return (stream.group(1), stream.group(2), int(stream.group(3)),
          int(stream.group(4)), int(frames[-1]))


def test_an_mp4_is_h264_yuv420p_at_even_sizes(tmp_path):
  path = str(tmp_path / 'odd.mp4')
  writer = video.Mp4(path, fps=10)
  for i in range(5):  # 7 x 5 frames: padded to 8 x 6.
    writer.add(np.full((5, 7, 3), 40 * i, np.uint8))
  writer.close()
  assert video_stream(path) == ('h264', 'yuv420p', 8, 6, 5)


def _play(environment, actions):
  """(return, last observation, steps) of one episode of `actions`."""
  timestep, total, steps = environment.reset(), 0.0, 0
  for action in actions:
    timestep = environment.step(action)
    total += timestep.reward
    steps += 1
    if timestep.last():
      break
  return total, timestep.observation, steps


def test_minatar_is_filmed_in_colour_and_plays_as_unfilmed(tmp_path):
  make = lambda: environments.make_environment('minatar:breakout', 3,
                                               max_episode_steps=40)
  actions = np.random.default_rng(0).integers(0, 3, 40)
  unfilmed = _play(make(), actions)
  environment = make()
  frame = video.frame_source(environment)
  image = frame()
  path = str(tmp_path / 'breakout.mp4')
  filmed = video.filmed(environment, frame, path, 10)
  returned = _play(filmed, actions)
  assert returned[0] == unfilmed[0]
  np.testing.assert_array_equal(returned[1], unfilmed[1])
  assert image.shape == (320, 320, 3)
  assert len({tuple(c) for c in image.reshape(-1, 3)}) >= 3  # Colours.
  assert video_stream(path)[:4] == ('h264', 'yuv420p', 320, 320)
  # The reset's frame and every step's, the file closed at the end.
  assert filmed.video.frames == returned[2] + 1 == video_stream(path)[4]


def test_atari_frames_are_the_games_rgb_screen():
  environment = environments.make_environment('atari:Pong', 0,
                                              evaluation=True)
  environment.reset()
  image = video.frame_source(environment)()
  assert image.shape == (210, 160, 3) and image.dtype == np.uint8
  assert image.std() > 0


def test_without_opengl_one_line_names_the_packages_and_it_plays_on(
    tmp_path, monkeypatch):
  run_dir = _run_dir(tmp_path, 'smoke')
  # As on a machine without libEGL or libOSMesa (this one has EGL).
  monkeypatch.delenv('MUJOCO_GL', raising=False)
  monkeypatch.setattr(video, '_loads', lambda name: False)
  lines = []
  result = evaluate.evaluate(evaluate.Request(run_dir, episodes=2,
                                              video=True), lines.append)
  assert len(result['returns']) == 2 and result['videos'] == []
  [said] = [l for l in lines if l.startswith('video: ')]
  assert 'libegl1' in said and 'libosmesa6' in said, said
  assert not os.path.exists(result['path'][:-len('.json')])
