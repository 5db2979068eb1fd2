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
MuJoCo's and dm_control's frames are drawn with one frozen `Look`,
`FILMED`, set where the task's renderer is made (its first frame): no
multisampling, no shadows, no reflections, the costs of MuJoCo's own look
on a software rasterizer (bench/evaluate.py measures both side by side);
one renderer a task, its GL context made current for each frame, RGB
alone.
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
import weakref
from typing import Callable, Dict, List, Optional

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


@dataclasses.dataclass(frozen=True)
class Look:
  """How a filmed MuJoCo or dm_control frame is drawn. On Mesa's software
  rasterizer (llvmpipe, what EGL and OSMesa are on a machine without a GPU)
  MuJoCo's own look costs a 480 x 480 HalfCheetah frame 4 to 5 times what
  this one does: its shadow map (4096 x 4096, drawn every frame) and 4x
  multisampling take most of it, then the floor's mirror image (the scene
  drawn twice), for a picture of the same body in the same place.
  `offsamples` None and the flags True are MuJoCo's own."""
  offsamples: Optional[int] = 0   # Multisampling (MSAA) off.
  shadows: bool = False
  reflections: bool = False
  skybox: bool = True             # Without it the background is black.

  def flags(self) -> Dict[int, bool]:
    """The scene's rendering flags (mjtRndFlag) this look sets."""
    import mujoco
    flag = mujoco.mjtRndFlag
    return {flag.mjRND_SHADOW: self.shadows,
            flag.mjRND_REFLECTION: self.reflections,
            flag.mjRND_SKYBOX: self.skybox}

  def prepare(self, model, size: int) -> None:
    """Sets the model's visual options the rendering context is made
    from (before it is made): samples, an off-screen buffer of at least
    `size`. Visual options only; the simulation is unchanged."""
    if self.offsamples is not None:
      model.vis.quality.offsamples = self.offsamples
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, size)
    model.vis.global_.offheight = max(model.vis.global_.offheight, size)


FILMED = Look()                     # What filming draws (bench/evaluate.py).
TASKS_OWN = Look(offsamples=None, shadows=True, reflections=True)  # MuJoCo's.


class MujocoFrames:
  """Frames of a gym or Gymnasium MuJoCo task from the task's own
  off-screen viewer (its GL context, camera and scene), made at the first
  frame and drawn with a Look: the context made current for each frame
  (several filmed tasks play side by side), RGB read alone (no depth),
  turned upright. `make()`: (viewer, camera id or None, width, height).
  The task owns its viewer (held here by a weak reference): closing the
  task frees its GL context then, not a finalizer at exit, when EGL is
  gone."""

  def __init__(self, make: Callable[[], tuple], look: Look):
    self._make = make
    self._look = look
    self._viewer = None

  @property
  def viewer(self):
    return self._viewer() if self._viewer is not None else None

  @property
  def scene(self):
    return self.viewer.scn

  @property
  def context(self):
    return self.viewer.con

  def _made(self):
    import mujoco
    viewer, self._camera_id, width, height = self._make()
    self._viewer = weakref.ref(viewer)
    self._shape = (height, width, 3)
    self._rect = mujoco.MjrRect(0, 0, width, height)
    for flag, on in self._look.flags().items():
      viewer.scn.flags[flag] = on
    return viewer

  def __call__(self) -> np.ndarray:
    import mujoco
    viewer = self.viewer
    if viewer is None:  # The first frame, or the first after a close.
      viewer = self._made()
    viewer.opengl_context.make_current()
    if self._camera_id is not None:  # As the task's own render sets it.
      viewer.cam.type = (mujoco.mjtCamera.mjCAMERA_FREE
                         if self._camera_id == -1
                         else mujoco.mjtCamera.mjCAMERA_FIXED)
      viewer.cam.fixedcamid = self._camera_id
    mujoco.mjv_updateScene(viewer.model, viewer.data, viewer.vopt,
                           viewer.pert, viewer.cam,
                           mujoco.mjtCatBit.mjCAT_ALL, viewer.scn)
    mujoco.mjr_render(self._rect, viewer.scn, viewer.con)
    image = np.empty(self._shape, np.uint8)
    mujoco.mjr_readPixels(image, None, self._rect, viewer.con)
    return image[::-1]


class ControlFrames:
  """Frames of a dm_control task's physics from one camera kept for it
  (one scene, not one a frame), drawn with a Look."""

  def __init__(self, environment, size: int, look: Look):
    self._environment = environment
    self._size = size
    self._look = look
    self._camera = None

  @property
  def scene(self):
    return self._camera.scene

  @property
  def context(self):
    return self._camera._physics.contexts.mujoco.ptr  # pylint: disable=protected-access

  def __call__(self) -> np.ndarray:
    physics = self._environment.physics  # A task may make a new one.
    if self._camera is None or self._camera._physics is not physics:  # pylint: disable=protected-access
      from dm_control.mujoco import engine
      self._look.prepare(physics.model, self._size)
      self._camera = engine.Camera(physics, self._size, self._size,
                                   camera_id=0)
      for flag, on in self._look.flags().items():
        self._camera.scene.flags[flag] = on
    return self._camera.render()


def frame_source(environment, size: int = SIZE, look: Look = FILMED
                 ) -> Optional[Callable[[], np.ndarray]]:
  """A function returning the task's current frame (H x W x 3 uint8), or
  None when the task is none of those filmed here. `size`: MuJoCo's and
  dm_control's frames, square (Atari and MinAtar have their own; a
  Gymnasium task's, its own width and height); `look`: how they are drawn,
  set where their renderer is made (the first frame)."""
  for item in _inner_objects(environment):
    if hasattr(item, 'getScreenRGB'):                   # ALE (Atari).
      return item.getScreenRGB
    if hasattr(item, 'physics') and hasattr(item.physics, 'render'):
      return ControlFrames(item, size, look)            # dm_control.
    if hasattr(item, 'state') and hasattr(item, 'minimal_action_set'):
      return _minatar(item)                             # MinAtar.
    if item is not getattr(item, 'unwrapped', None):
      continue  # A gym wrapper: it forwards the base's attributes.
    renderer = getattr(item, 'mujoco_renderer', None)   # Gymnasium MuJoCo.
    if renderer is not None:
      return MujocoFrames(lambda env=item: _gymnasium(env, look), look)
    if hasattr(item, 'model') and hasattr(item, 'data') and hasattr(
        item, '_get_viewer'):                           # gym 0.25 MuJoCo.
      return MujocoFrames(lambda env=item: _gym(env, size, look), look)
  return None


def _gym(environment, size: int, look: Look):
  """gym 0.25's MuJoCo task: its 'rgb_array' viewer, its camera (the
  model's 'track' where it has one, else the free camera)."""
  import mujoco
  look.prepare(environment.model, size)
  viewer = environment._get_viewer('rgb_array')  # pylint: disable=protected-access
  _fit_context(viewer, look)
  camera_id = mujoco.mj_name2id(environment.model,
                                mujoco.mjtObj.mjOBJ_CAMERA, 'track')
  return viewer, camera_id, size, size


def _gymnasium(environment, look: Look):
  """A Gymnasium MuJoCo task: its renderer's 'rgb_array' viewer, size and
  camera."""
  renderer = environment.mujoco_renderer
  look.prepare(environment.model, max(renderer.width, renderer.height))
  viewer = renderer._get_viewer('rgb_array')  # pylint: disable=protected-access
  _fit_context(viewer, look)
  return viewer, renderer.camera_id, renderer.width, renderer.height


def _fit_context(viewer, look: Look) -> None:
  """A viewer made before the look's samples were set (a task rendered
  before filming) gets its MuJoCo context made again with them."""
  import mujoco
  if look.offsamples is None or viewer.con.offSamples == look.offsamples:
    return
  viewer.opengl_context.make_current()
  viewer.con.free()
  viewer.con = mujoco.MjrContext(viewer.model,
                                 mujoco.mjtFontScale.mjFONTSCALE_150)
  mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, viewer.con)


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
