"""R2D2's recurrent Q-network, sized by `config.network`.

Acme's `make_atari_networks` builds `R2D2AtariNetwork`: fixed sizes (Nature
torso, LSTM 512, duelling head 512) on an observation-action-reward tuple
of HWC float frames. Ours takes the observation alone, as the environments
give it: uint8 images (Atari's (4, 84, 84) frame stacks, channels first;
MinAtar's (10, 10, C) grids with `network.channels_last`) are scaled to
[0, 1] inside the network, so replay holds uint8; other observations are
flattened. Then a conv torso (`network.conv_channels`, `conv_kernels`,
`conv_strides`; images only, agents/images.py), an LSTM of
`network.lstm_size` and Acme's duelling head (`network.head_hidden_layers`).
The sizes are config fields so a test can run a network of a few hundred
parameters.
"""

from typing import Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax.r2d2 import networks as r2d2_networks
from acme.jax.networks import duelling
import haiku as hk
import jax.numpy as jnp
import ml_collections

from acme_launch.agents import devices
from acme_launch.agents import images
from acme_launch.agents.recurrent import unroll_lstm


class RecurrentQNetwork(hk.RNNCore):
  """Frames (or a vector) -> torso -> LSTM -> duelling Q-values."""

  def __init__(self, num_actions: int, network: ml_collections.ConfigDict,
               layout: Optional[images.Images]):
    super().__init__(name='r2d2_network')
    self._network = network
    self._layout = layout
    self._core = hk.LSTM(network.lstm_size)
    self._head = duelling.DuellingMLP(
        num_actions, hidden_sizes=list(network.head_hidden_layers))

  def _torso(self, observation: jnp.ndarray) -> jnp.ndarray:
    """[B, ...] observations -> [B, D] embeddings."""
    if self._layout is None:
      return hk.Flatten()(observation.astype(jnp.float32))
    return images.torso(self._network, self._layout, observation)

  def __call__(self, observation, state: hk.LSTMState):
    outputs, state = self._core(self._torso(observation), state)
    return self._head(outputs), state

  def initial_state(self, batch_size, **unused_kwargs) -> hk.LSTMState:
    return self._core.initial_state(batch_size)

  def unroll(self, observations, state: hk.LSTMState):
    """[T, B, ...] observations: torso and head on all steps at once, the
    LSTM in a loop (unroll_lstm)."""
    embeddings = hk.BatchApply(self._torso)(observations)
    outputs, states = unroll_lstm(self._core, embeddings, state)
    return hk.BatchApply(self._head)(outputs), states


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec
                  ) -> r2d2_networks.R2D2Networks:
  num_actions = environment_spec.actions.num_values
  layout = images.images(config.network, environment_spec.observations)

  def network():
    return RecurrentQNetwork(num_actions, config.network, layout)

  return r2d2_networks.make_networks(
      env_spec=environment_spec,
      forward_fn=lambda x, s: network()(x, s),
      initial_state_fn=lambda batch_size=None: network().initial_state(
          batch_size),
      unroll_fn=lambda x, s: network().unroll(x, s),
      # Acme initialises the unroll on a batch of this size; its learner
      # gives it the initial state of one device's batch.
      batch_size=devices.per_device_batch(config, 'r2d2',
                                          config.r2d2.batch_size))
