"""Episodes filmed as they play: frames from the task, H.264 mp4 files.

`python -m acme_launch.evaluate RUN_DIR --video` wraps the episodes'
environments in `Filmed`, which takes a frame after every reset and step
and hands it straight to the encoder, so no episode is ever held in
memory. The encoder is ffmpeg's libx264 through imageio-ffmpeg, whose
wheel brings its own ffmpeg binary (no system ffmpeg), writing yuv420p, the
pixel format browsers play, at even frame sizes (frames are padded by a
pixel where needed: yuv420p halves the chroma resolution).

The frames come from the task itself: MuJoCo (gym, Gymnasium) and
dm_control render off-screen through OpenGL, Atari's screen is ALE's RGB
frame, MinAtar's grid is drawn in a colour per channel. Off-screen OpenGL
is EGL where the machine has it, else OSMesa (software); the choice
(`MUJOCO_GL`, `PYOPENGL_PLATFORM`) must be made before MuJoCo is first
imported, so `choose_gl` runs first thing. A machine with neither gets one
line naming the Debian packages, and the episodes play without video.
Filming reads the simulator's state and never changes it: the episodes'
returns are the same with and without it.

Two users: `python -m acme_launch.evaluate --video` (use/evaluate.py) films
episodes with `filmed`, one environment an episode; the evaluator node of a
run with `config.eval_video_every` keeps one `Camera` on an environment that
plays on after each evaluation, films the episode it is told to, writes it
under a hidden name renamed when complete (so the launcher's trackers never
read half a file) and keeps a few downscaled frames of it for TensorBoard's
animated image (`gif`). This module sits under `program/` and `use/` so that
both share it.
"""

import ctypes
import ctypes.util
import dataclasses
import io
import os
import sys
from typing import Callable, List, Optional

from acme_launch import compat  # noqa: F401  JAX aliases; before acme
from acme import wrappers
import numpy as np

GL_LIBRARIES = {'egl': ('EGL',), 'osmesa': ('OSMesa',)}
DEBIAN_PACKAGES = 'libegl1 libegl-mesa0 (EGL) or libosmesa6 (OSMesa)'
NO_GL = ('no off-screen OpenGL here (neither EGL nor OSMesa loads): install '
         f'the Debian packages {DEBIAN_PACKAGES}, e.g. sudo apt-get install '
         'libegl1 libegl-mesa0; the episodes play without video')
SIZE = 480                          # MuJoCo and dm_control frames, square.
MINATAR_CELL = 32                   # Pixels per MinAtar grid cell.
_MINATAR_COLOURS = np.array([       # One per channel, then the background.
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200),
    (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230),
    (210, 245, 60), (250, 190, 212)], np.uint8)
_BACKGROUND = np.array((20, 20, 20), np.uint8)


def _loads(name: str) -> bool:
  path = ctypes.util.find_library(name)
  if not path:
    return False
  try:
    ctypes.CDLL(path)
  except OSError:
    return False
  return True


def choose_gl() -> Optional[str]:
  """MUJOCO_GL for off-screen rendering ('egl', else 'osmesa'), set for
  MuJoCo, dm_control and PyOpenGL unless the user set it; None when the
  machine has neither. Call it before MuJoCo is imported."""
  chosen = os.environ.get('MUJOCO_GL')
  if not chosen:
    chosen = next((gl for gl, names in GL_LIBRARIES.items()
                   if all(_loads(n) for n in names)), None)
    if chosen is None:
      return None
    if 'mujoco' not in sys.modules:
      os.environ['MUJOCO_GL'] = chosen
  os.environ.setdefault('PYOPENGL_PLATFORM', chosen)
  return chosen


def _inner_objects(environment):
  """The environment and every object it wraps, outermost first."""
  seen, queue = set(), [environment]
  while queue:
    item = queue.pop(0)
    if item is None or id(item) in seen:
      continue
    seen.add(id(item))
    yield item
    for attribute in ('_environment', 'environment', 'env', '_env', '_game',
                      '_ale', 'ale', 'unwrapped'):
      try:
        queue.append(getattr(item, attribute, None))
      except Exception:  # A property that raises: not a wrapper.
        continue


def _pad_even(frame: np.ndarray) -> np.ndarray:
  frame = np.asarray(frame, np.uint8)
  height, width = frame.shape[:2]
  return np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode='edge')


def _minatar(game) -> Callable[[], np.ndarray]:
  def frame():
    state = np.asarray(game.state(), bool)       # (10, 10, channels)
    image = np.broadcast_to(_BACKGROUND, state.shape[:2] + (3,)).copy()
    for channel in range(state.shape[-1]):
      image[state[..., channel]] = _MINATAR_COLOURS[channel %
                                                    len(_MINATAR_COLOURS)]
    return np.kron(image, np.ones((MINATAR_CELL, MINATAR_CELL, 1), np.uint8))
  return frame


def frame_source(environment, size: int = SIZE
                 ) -> Optional[Callable[[], np.ndarray]]:
  """A function returning the task's current frame (H x W x 3 uint8), or
  None when the task is none of those filmed here. `size`: MuJoCo's and
  dm_control's frames, square (Atari and MinAtar have their own)."""
  for item in _inner_objects(environment):
    if hasattr(item, 'getScreenRGB'):                   # ALE (Atari).
      return item.getScreenRGB
    if hasattr(item, 'physics') and hasattr(item.physics, 'render'):
      physics = item.physics                            # dm_control.
      return lambda: physics.render(size, size, camera_id=0)
    if hasattr(item, 'state') and hasattr(item, 'minimal_action_set'):
      return _minatar(item)                             # MinAtar.
    if item is not getattr(item, 'unwrapped', None):
      continue  # A gym wrapper: it forwards the base's attributes.
    renderer = getattr(item, 'mujoco_renderer', None)   # Gymnasium MuJoCo.
    if renderer is not None:
      return lambda: renderer.render('rgb_array')
    if hasattr(item, 'model') and hasattr(item, 'data') and hasattr(
        item, 'render'):                                # gym 0.25 MuJoCo.
      return lambda env=item: env.render(mode='rgb_array', width=size,
                                         height=size)
  return None


def frames_per_second(environment) -> float:
  """The task's own rate where it says it, else 30."""
  for item in _inner_objects(environment):
    metadata = getattr(item, 'metadata', None)
    if isinstance(metadata, dict):
      fps = metadata.get('render_fps') or metadata.get('video.frames_per_second')
      if fps:
        return float(fps)
    control = getattr(item, 'control_timestep', None)
    if callable(control):
      return 1.0 / float(control())
  return 30.0


class Mp4:
  """An H.264 mp4 written a frame at a time (ffmpeg reads them from a pipe)."""

  def __init__(self, path: str, fps: float):
    import imageio.v2 as imageio
    self.path = path
    self.frames = 0
    self._writer = imageio.get_writer(
        path, format='FFMPEG', mode='I', fps=fps, codec='libx264',
        pixelformat='yuv420p', macro_block_size=1, quality=7,
        ffmpeg_log_level='error')

  def add(self, frame: np.ndarray) -> None:
    self._writer.append_data(_pad_even(frame))
    self.frames += 1

  def close(self) -> None:
    self._writer.close()


def filmed(environment, frame: Callable[[], np.ndarray], path: str,
           fps: float):
  """`environment` filming its next episode to `path`: a frame after the
  reset and after every step; when the episode ends the file and the
  environment are closed (it plays one episode)."""
  return Filmed(environment, frame, path, fps)


class Filmed(wrappers.EnvironmentWrapper):
  """One episode filmed; the environment itself unchanged."""

  def __init__(self, environment, frame: Callable[[], np.ndarray], path: str,
               fps: float):
    super().__init__(environment)
    self._frame = frame
    self.video = Mp4(path, fps)

  def _film(self, timestep):
    self.video.add(self._frame())
    if timestep.last():
      self.video.close()
      # Its renderer's GL context freed now, while the GL library is
      # loaded: freed at exit, EGL's context raises in its finalizer.
      self._environment.close()
    return timestep

  def reset(self):
    return self._film(self._environment.reset())

  def step(self, action):
    return self._film(self._environment.step(action))


THUMBNAIL_WIDTH = 128   # TensorBoard's animation: frames at most this wide,
THUMBNAIL_FRAMES = 48   # at most this many of them, evenly spread.


@dataclasses.dataclass
class Clip:
  """A filmed episode: its mp4 and a few small frames of it."""
  path: str
  frames: int
  fps: float
  thumbnails: List[np.ndarray]
  thumbnail_fps: float


class Thumbnails:
  """Every `stride`-th frame, downscaled by whole pixels to at most
  THUMBNAIL_WIDTH wide; past THUMBNAIL_FRAMES every other one is dropped
  and the stride doubled, so an episode of any length keeps at most that
  many, evenly spread, in memory."""

  def __init__(self):
    self.frames: List[np.ndarray] = []
    self.stride = 1
    self._seen = 0

  def add(self, frame: np.ndarray) -> None:
    if self._seen % self.stride == 0:
      step = -(-frame.shape[1] // THUMBNAIL_WIDTH)  # Ceiling division.
      self.frames.append(np.ascontiguousarray(frame[::step, ::step, :3]))
      if len(self.frames) > THUMBNAIL_FRAMES:
        self.frames = self.frames[::2]
        self.stride *= 2
    self._seen += 1


def gif(frames: List[np.ndarray], fps: float) -> bytes:
  """An animated GIF of `frames` (Pillow, through imageio), looping."""
  import imageio.v3 as iio
  buffer = io.BytesIO()
  iio.imwrite(buffer, np.stack(frames), extension='.gif',
              duration=max(20, int(1000 / fps)), loop=0)
  return buffer.getvalue()


class Camera(wrappers.EnvironmentWrapper):
  """An environment that films the episode after `film_next(path)` and
  otherwise steps as it would: the evaluator node's environment, which
  plays on after each evaluation. The mp4 is written under a hidden name
  beside `path` and renamed to `path` when the episode ends; `take()` then
  returns its Clip."""

  def __init__(self, environment, frame: Callable[[], np.ndarray],
               fps: float):
    super().__init__(environment)
    self._frame = frame
    self._fps = fps
    self._next = self._target = ''
    self._video: Optional[Mp4] = None
    self._thumbnails: Optional[Thumbnails] = None
    self._clip: Optional[Clip] = None

  def film_next(self, path: str) -> None:
    """Films the next episode (from its reset) to `path`."""
    self._next = path

  def take(self) -> Optional[Clip]:
    """The last episode filmed since the last call, if one ended."""
    clip, self._clip = self._clip, None
    return clip

  def reset(self):
    if self._video is not None:  # An episode cut short: its file dropped.
      self._video.close()
      os.remove(self._video.path)
      self._video = None
    timestep = self._environment.reset()
    if self._next:
      folder, name = os.path.split(self._next)
      os.makedirs(folder, exist_ok=True)
      self._video = Mp4(os.path.join(folder, f'.{name}'), self._fps)
      self._thumbnails = Thumbnails()
      self._target, self._next = self._next, ''
    return self._film(timestep)

  def step(self, action):
    return self._film(self._environment.step(action))

  def _film(self, timestep):
    if self._video is None:
      return timestep
    frame = self._frame()
    self._video.add(frame)
    self._thumbnails.add(frame)
    if timestep.last():
      self._video.close()
      os.replace(self._video.path, self._target)
      self._clip = Clip(self._target, self._video.frames, self._fps,
                        self._thumbnails.frames,
                        self._fps / self._thumbnails.stride)
      self._video = self._thumbnails = None
    return timestep


def camera(environment, warn: Callable[[str], None], size: int = SIZE):
  """`environment` in a Camera, or unchanged (and one line to `warn`)
  when it cannot be filmed here: no off-screen OpenGL, no frames, a
  renderer that fails. For MuJoCo, `choose_gl` must have run before the
  environment was made (before MuJoCo's import)."""
  frame = frame_source(environment, size)
  try:
    if frame is None:
      raise ValueError('the task gives no frames to film')
    frame()
  except Exception as e:  # The GL context, the renderer: one line.
    warn(f'video: no video: {type(e).__name__}: '
         f'{" ".join(str(e).split())[:200]} (Debian packages for '
         f'off-screen OpenGL: {DEBIAN_PACKAGES})')
    return environment
  return Camera(environment, frame, frames_per_second(environment))
