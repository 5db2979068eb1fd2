"""A learner on several devices: the config's batch split between them.

dm-acme 0.4.0's IMPALA and R2D2 learners pmap their SGD step over the
devices their process has and feed it through
`acme.jax.utils.sharded_prefetch`, which takes one whole batch from the
dataset per device: as shipped, N devices train on N x `batch_size`
sequences a step, sample the replay N times as fast and drain IMPALA's
queue N times as fast. Their builders here batch the dataset by
`batch_size / N` instead (`per_device_batch`), so that a step trains on the
config's `batch_size` sequences whatever N: the gradient averaged over the
devices (Acme's `pmean`) is the gradient of the whole batch's mean loss,
and the replay's rate limiting sees the same samples per step.
"""

import ml_collections

from acme_launch import errors
from acme_launch.plan import specs


def num_devices(config: ml_collections.ConfigDict) -> int:
  """The devices the learner runs on (`resources.learner.num_devices`)."""
  return specs.learner_num_devices(config)


def per_device_batch(config: ml_collections.ConfigDict, section: str,
                     batch_size: int) -> int:
  """`batch_size` (the global batch of `config.<section>.batch_size`) over
  the learner's devices; LaunchError (one line) when they do not divide."""
  devices = num_devices(config)
  if batch_size % devices:
    raise errors.LaunchError(
        f'config.{section}.batch_size={batch_size} does not split over the '
        f"learner's {devices} devices (config.resources.learner.num_devices):"
        f' make it a multiple of {devices}')
  return batch_size // devices
