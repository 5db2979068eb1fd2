"""Image observations in the shipped networks (R2D2's, DQN's, IMPALA's): which
observations are images, how they are laid out, and a conv torso sized by
`config.network`.

An image is a rank-3 uint8 observation. Its values are scaled to [0, 1] by
the spec's maximum (255 for Atari's frames, 1 for MinAtar's 0/1 grids), so
replay keeps the compact uint8. Layout: channels first, as EnvPool stacks
Atari frames (4, 84, 84), unless `config.network.channels_last` is true, as
for MinAtar's (10, 10, C). The torso is `conv_channels`, `conv_kernels`,
`conv_strides` (VALID padding, ReLU after each), then flattened; `check`
refuses, before launch, a torso whose convolutions do not fit the image.
"""

import dataclasses
from typing import Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import haiku as hk
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from acme_launch import errors


@dataclasses.dataclass(frozen=True)
class Images:
  channels_last: bool
  scale: float  # Multiplies the uint8 values into [0, 1].


def images(network: ml_collections.ConfigDict,
           observation_spec: specs.Array) -> Optional[Images]:
  """How to read the observations as images; None if they are not."""
  if not (len(observation_spec.shape) == 3 and
          np.dtype(observation_spec.dtype) == np.uint8):
    return None
  maximum = 255.0
  if isinstance(observation_spec, specs.BoundedArray):
    highest = float(np.max(observation_spec.maximum))
    if 0 < highest < 255:
      maximum = highest
  return Images(bool(network.get('channels_last', False)), 1.0 / maximum)


def conv_layers(network: ml_collections.ConfigDict):
  """(channels, kernel, stride) of each convolution; none if the config
  names no conv_channels."""
  return list(zip(network.get('conv_channels', ()),
                  network.get('conv_kernels', ()),
                  network.get('conv_strides', ())))


def torso(network: ml_collections.ConfigDict, layout: Images,
          observation: jnp.ndarray) -> jnp.ndarray:
  """[B, ...image] uint8 -> [B, D] float32; call inside a haiku transform."""
  x = observation.astype(jnp.float32) * layout.scale
  if not layout.channels_last:
    x = jnp.moveaxis(x, -3, -1)  # [B, C, H, W] -> [B, H, W, C].
  for channels, kernel, stride in conv_layers(network):
    x = jax.nn.relu(hk.Conv2D(channels, kernel, stride, padding='VALID')(x))
  return hk.Flatten()(x)


def check(agent: str, network: ml_collections.ConfigDict,
          observation_spec: specs.Array) -> None:
  """LaunchError (one line) if the conv fields disagree in length or the
  convolutions shrink the image to nothing."""
  lengths = {len(network.get(f, ())) for f in
             ('conv_channels', 'conv_kernels', 'conv_strides')}
  if len(lengths) > 1:
    raise errors.LaunchError(
        f'config.network.conv_channels, conv_kernels and conv_strides of '
        f'{agent} must have one entry per convolution, got '
        f'{tuple(network.get("conv_channels", ()))}, '
        f'{tuple(network.get("conv_kernels", ()))} and '
        f'{tuple(network.get("conv_strides", ()))}')
  layout = images(network, observation_spec)
  if layout is None:
    return
  shape = tuple(observation_spec.shape)
  height, width = shape[:2] if layout.channels_last else shape[1:]
  size = (height, width)
  for channels, kernel, stride in conv_layers(network):
    if min(channels, kernel, stride) < 1:
      raise errors.LaunchError(
          f'config.network\'s conv channels, kernels and strides must be >= '
          f'1, got {channels}, {kernel} and {stride}')
    size = tuple((s - kernel) // stride + 1 for s in size)
    if min(size) < 1:
      raise errors.LaunchError(
          f'config.network\'s convolutions (kernels '
          f'{tuple(network.conv_kernels)}, strides '
          f'{tuple(network.conv_strides)}) do not fit {agent}\'s '
          f'{height}x{width} images of shape {shape} (channels_last='
          f'{layout.channels_last}); choose smaller kernels and strides, or '
          'config.network.channels_last to match the observations')
