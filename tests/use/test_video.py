"""acme_launch.envs.video in this process, where no OpenGL is needed: the
mp4 files (H.264, yuv420p, even sizes, one frame at a time), MinAtar's grid
and Atari's screen as frames, a filmed episode's returns unchanged, and a
machine without off-screen OpenGL (the evaluation plays on, one line says
which packages). MuJoCo's off-screen frames need the GL choice made before
MuJoCo is imported, so they are tested in a process of their own, as a user
runs `--video` (tests/e2e/test_evaluate.py).

The evaluator node's camera (config.eval_video_every) is tested here with
the evaluator's own Evaluation on MinAtar: only the episode it is told to
film is filmed, the returns are those of the same evaluation unfilmed; in
a run (the e2e smoke run), tests/e2e/test_evaluate.py.
"""

import json
import os
import subprocess
import sys

from acme_launch import compat  # noqa: F401  JAX aliases; before acme
from acme.jax import variable_utils
import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np

from acme_launch import envs as environments
from acme_launch.program import evaluation
from acme_launch.use import restore
from acme_launch.use import evaluate
from acme_launch.envs import video
from acme_launch.testing.launcher import REPO_ROOT, checkout_on_path, user_env
from tests.use.test_evaluate import _run_dir
from tests.use.video_stream import video_stream


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


def _breakout(seed):
  return environments.make_environment('minatar:breakout', seed,
                                       max_episode_steps=30, evaluation=True)


def _policy(params, key, observations):
  """An action from the observation: the episodes depend on what is seen."""
  del params, key
  seen = jnp.sum(observations.reshape(observations.shape[0], -1), axis=1)
  return (seen.astype(jnp.int32) + 1) % 3


def _evaluation(make_first=None):
  return evaluation.Evaluation(
      _breakout, [5, 6, 7], _policy,
      variable_utils.VariableClient(restore.ParamsSource({}), 'policy'),
      jax.random.PRNGKey(0), policy_returns_extras=False,
      make_first=make_first)


def test_the_evaluators_camera_films_when_told_and_the_returns_stay(tmp_path):
  warnings = []
  filmed = _evaluation(lambda seed: video.camera(_breakout(seed),
                                                 warnings.append))
  plain = _evaluation()
  folder = tmp_path / 'videos'
  first = filmed.run(film_to=str(folder / 'evaluator_0-0.mp4'))
  second = filmed.run()                     # Not filmed: plays on.
  third = filmed.run(film_to=str(folder / 'evaluator_0-9.mp4'))
  for result, expected in zip((first, second, third),
                              (plain.run(), plain.run(), plain.run())):
    assert result['returns'] == expected['returns']
    assert result['lengths'] == expected['lengths']
  assert warnings == [] and 'clip' not in second
  clip = first['clip']
  assert clip.path == str(folder / 'evaluator_0-0.mp4')
  # The first episode, from its reset; complete files only, no hidden one.
  assert clip.frames == first['lengths'][0] + 1 == video_stream(clip.path)[4]
  assert sorted(os.listdir(folder)) == ['evaluator_0-0.mp4',
                                        'evaluator_0-9.mp4']
  assert third['clip'].frames == third['lengths'][0] + 1
  # TensorBoard's animation: small frames, an animated GIF of them.
  assert all(t.shape == (107, 107, 3) for t in clip.thumbnails)  # 320 / 3.
  animation = video.gif(clip.thumbnails, clip.thumbnail_fps)
  assert animation[:6] == b'GIF89a'
  assert iio.imread(animation, index=None).shape == (
      len(clip.thumbnails), 107, 107, 3)


def test_thumbnails_of_a_long_episode_stay_few_small_and_evenly_spread():
  thumbnails = video.Thumbnails()
  for i in range(5000):
    thumbnails.add(np.full((480, 480, 3), i % 256, np.uint8))
  frames = thumbnails.frames
  assert video.THUMBNAIL_FRAMES // 2 <= len(frames) <= video.THUMBNAIL_FRAMES
  assert frames[0].shape == (120, 120, 3)
  shades = [int(f[0, 0, 0]) for f in frames]
  assert shades == [(i * thumbnails.stride) % 256 for i in range(len(frames))]


def test_a_task_without_frames_keeps_its_environment_with_one_line():
  from acme_launch.envs import pomdp  # noqa: F401  Registers the family.
  environment = environments.make_environment('pomdp:CartPole-v1', 0)
  warnings = []
  assert video.camera(environment, warnings.append) is environment
  [line] = warnings
  assert line.startswith('video: no video: ') and 'no frames' in line


_LOOK = r"""
import json
import numpy as np
from acme_launch.envs import video
video.choose_gl()  # Before MuJoCo is imported.
from acme_launch import envs
seen, kept = {}, []  # The frame functions kept, as a filmed episode's are.
for name in ('HalfCheetah-v4', 'gymnasium:HalfCheetah-v5', 'dmc:cheetah-run'):
  environment = envs.make_environment(name, 0, evaluation=True)
  environment.reset()
  frame = video.frame_source(environment)
  kept.append(frame)
  image = frame()
  seen[name] = {
      'shape': list(image.shape), 'std': float(image.std()),
      'flags': {str(int(f)): int(frame.scene.flags[f])
                for f in video.FILMED.flags()},
      'offsamples': int(frame.context.offSamples)}
  if name == 'HalfCheetah-v4':  # The task's own frame of the same state.
    own = envs.make_environment(name, 0, evaluation=True)
    own.reset()
    base = [e for e in video._inner_objects(own) if hasattr(e, 'viewer')][0]
    theirs = base.render(mode='rgb_array', width=480, height=480)
    seen[name]['off_theirs'] = float(np.abs(
        image.astype(int) - theirs).mean())
    seen[name]['off_theirs_upside_down'] = float(np.abs(
        image[::-1].astype(int) - theirs).mean())
    own.close()
  environment.close()
print(json.dumps(seen))
"""


def test_mujoco_and_dm_control_frames_are_drawn_with_the_filmed_look():
  """The look is applied where the renderer is made (gym 0.25, Gymnasium,
  dm_control): no multisampling, shadows or reflections, as read back
  from the renderer's context and scene; the frame is the task's own view,
  upright.
  In a process of its own: the GL choice comes before MuJoCo's import."""
  result = subprocess.run(
      [sys.executable, '-c', _LOOK], cwd=REPO_ROOT, capture_output=True,
      text=True, timeout=300, env=checkout_on_path(user_env()), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  # A closed task's renderer is freed then, not by a finalizer at exit.
  assert 'Exception ignored' not in result.stderr, result.stderr[-3000:]
  seen = json.loads(result.stdout.strip().splitlines()[-1])
  flags = {str(int(f)): int(on) for f, on in video.FILMED.flags().items()}
  assert video.FILMED.offsamples == 0 and not video.FILMED.shadows
  assert not video.FILMED.reflections and video.FILMED.skybox
  for name, frame in seen.items():
    assert frame['shape'] == [480, 480, 3], name
    assert frame['std'] > 20, name  # A picture, not a blank.
    assert frame['flags'] == flags, name
    assert frame['offsamples'] == 0, name
  cheetah = seen['HalfCheetah-v4']
  # Close to the task's own (shadows, multisampling: a few pixels differ).
  assert cheetah['off_theirs'] < 4, cheetah
  assert cheetah['off_theirs_upside_down'] > 10 * cheetah['off_theirs']
