"""IMPALA's recurrent policy-value network, sized by `config.network`.

Acme's `make_atari_networks` builds `DeepIMPALAAtariNetwork`: fixed sizes
(the IMPALA paper's deep ResNet torso, LSTM 256) on an observation-action-
reward tuple of HWC float frames. Ours takes the observation alone, as the
environments give it: uint8 images (Atari's (4, 84, 84) frame stacks,
channels first; MinAtar's (10, 10, C) grids with `network.channels_last`)
are scaled to [0, 1] inside the network, so the queue holds uint8; other
observations are flattened. The torso is `network.torso`:

  'conv'  the conv stack of agents/images.py (`network.conv_channels`,
          `conv_kernels`, `conv_strides`)
  'deep'  Acme's `DeepAtariTorso`, the IMPALA paper's deep network (three
          residual sections of 16, 32, 32 channels, then 256 units)

then an LSTM of `network.lstm_size` and Acme's `PolicyValueHead` (a linear
layer for the logits, one for the value).

Acme's IMPALA calls the network on one sequence at a time: the actor steps
one unbatched observation (`__call__`), the learner's loss is mapped over
the batch and unrolls one `[T, ...]` sequence (`unroll`) from an unbatched
LSTM state.
"""

import dataclasses
from typing import Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax.impala import networks as impala_networks
from acme.jax.networks import atari
from acme.jax.networks import policy_value
import haiku as hk
import jax.numpy as jnp
import ml_collections

from acme_launch.agents import images
from acme_launch.agents.recurrent import unroll_lstm

TORSOS = ('conv', 'deep')


@dataclasses.dataclass
class Networks(impala_networks.IMPALANetworks):
  """Acme's IMPALA networks and the number of actions (the length of the
  logits the actor core keeps between steps)."""
  num_actions: int = 0


class PolicyValueNetwork(hk.RNNCore):
  """Frames (or a vector) -> torso -> LSTM -> (logits, value)."""

  def __init__(self, num_actions: int, network: ml_collections.ConfigDict,
               layout: Optional[images.Images]):
    super().__init__(name='impala_network')
    self._network = network
    self._layout = layout
    self._core = hk.LSTM(network.lstm_size)
    self._head = policy_value.PolicyValueHead(num_actions)

  def _torso(self, observations: jnp.ndarray) -> jnp.ndarray:
    """[N, ...] observations -> [N, D] embeddings."""
    if self._layout is None:
      return hk.Flatten()(observations.astype(jnp.float32))
    if self._network.get('torso', 'conv') == 'deep':
      x = observations.astype(jnp.float32) * self._layout.scale
      if not self._layout.channels_last:
        x = jnp.moveaxis(x, -3, -1)  # [N, C, H, W] -> [N, H, W, C].
      return atari.DeepAtariTorso()(x)
    return images.torso(self._network, self._layout, observations)

  def __call__(self, observation, state: hk.LSTMState):
    """One unbatched observation: the actor's step."""
    embedding = self._torso(observation[None])[0]
    outputs, state = self._core(embedding, state)
    return self._head(outputs), state

  def initial_state(self, batch_size, **unused_kwargs) -> hk.LSTMState:
    return self._core.initial_state(batch_size)

  def unroll(self, observations, state: hk.LSTMState):
    """One [T, ...] sequence: the torso on all steps at once."""
    outputs, states = unroll_lstm(
        self._core, self._torso(observations), state)
    return self._head(outputs), states


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec
                  ) -> Networks:
  num_actions = environment_spec.actions.num_values
  layout = images.images(config.network, environment_spec.observations)

  def network():
    return PolicyValueNetwork(num_actions, config.network, layout)

  networks = impala_networks.make_haiku_networks(
      env_spec=environment_spec,
      forward_fn=lambda x, s: network()(x, s),
      initial_state_fn=lambda batch_size=None: network().initial_state(
          batch_size),
      unroll_fn=lambda x, s: network().unroll(x, s))
  return Networks(num_actions=int(num_actions), **vars(networks))
