"""Image observations in the shipped networks (agents/images.py): which
observations are images, their scale and layout, the conv torso, and torsos
that cannot fit refused before launch. In process."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import haiku as hk
import jax
import ml_collections
import numpy as np
import pytest

from acme_launch import errors
from acme_launch.agents import images

ATARI = specs.BoundedArray((4, 84, 84), np.uint8, 0, 255, name='observation')
MINATAR = specs.BoundedArray((10, 10, 6), np.uint8, 0, 1, name='observation')


def _network(**fields):
  return ml_collections.ConfigDict(fields)


def test_only_rank_3_uint8_observations_are_images_scaled_by_their_maximum():
  assert images.images(_network(), ATARI) == images.Images(False, 1 / 255)
  assert images.images(_network(channels_last=True), MINATAR) == (
      images.Images(True, 1.0))
  assert images.images(_network(), specs.Array((10, 10, 6), np.float32)) is None
  assert images.images(_network(), specs.Array((17,), np.uint8)) is None
  # Unbounded uint8 images: Atari's 255.
  assert images.images(_network(), specs.Array((3, 8, 8), np.uint8)).scale == (
      1 / 255)


@pytest.mark.parametrize('spec, channels_last, expected', [
    (MINATAR, True, (8 * 8 * 16)),    # 10x10 -> 8x8 by a 3x3 convolution.
    (ATARI, False, (82 * 82 * 16)),   # Channels first: 84x84 -> 82x82.
])
def test_the_torso_convolves_height_and_width_and_scales_to_0_1(
    spec, channels_last, expected):
  network = _network(channels_last=channels_last, conv_channels=(16,),
                     conv_kernels=(3,), conv_strides=(1,))
  layout = images.images(network, spec)
  torso = hk.without_apply_rng(hk.transform(
      lambda x: images.torso(network, layout, x)))
  full = np.full((2, *spec.shape), int(np.max(spec.maximum)), np.uint8)
  params = torso.init(jax.random.PRNGKey(0), full)
  assert torso.apply(params, full).shape == (2, expected)
  # No convolutions: the scaled image, flattened; all ones at the maximum.
  flat = _network(channels_last=channels_last)
  embedding = hk.without_apply_rng(hk.transform(
      lambda x: images.torso(flat, layout, x))).apply({}, full)
  assert embedding.shape == (2, int(np.prod(spec.shape)))
  np.testing.assert_allclose(embedding, 1.0, rtol=1e-6)


@pytest.mark.parametrize('fields, expected', [
    (dict(conv_channels=(16,), conv_kernels=(3, 3), conv_strides=(1,)),
     'must have one entry per convolution'),
    (dict(channels_last=True, conv_channels=(32, 64, 64),
          conv_kernels=(8, 4, 3), conv_strides=(4, 2, 1)),
     "do not fit r2d2's 10x10 images"),
    # MinAtar's grid read channels first: 10 rows of 6.
    (dict(conv_channels=(16,), conv_kernels=(7,), conv_strides=(1,)),
     "do not fit r2d2's 10x6 images"),
    (dict(channels_last=True, conv_channels=(16,), conv_kernels=(3,),
          conv_strides=(0,)), 'must be >= 1'),
])
def test_torsos_that_cannot_run_on_minatar_are_one_line(fields, expected):
  with pytest.raises(errors.LaunchError, match=expected) as raised:
    images.check('r2d2', _network(**fields), MINATAR)
  assert '\n' not in str(raised.value)


def test_torsos_that_fit_pass():
  images.check('r2d2', _network(channels_last=True, conv_channels=(16,),
                                conv_kernels=(3,), conv_strides=(1,)), MINATAR)
  images.check('r2d2', _network(conv_channels=(32, 64, 64),
                                conv_kernels=(8, 4, 3),
                                conv_strides=(4, 2, 1)), ATARI)
  images.check('dqn', _network(hidden_layers=(64,)),
               specs.Array((4,), np.float32))
