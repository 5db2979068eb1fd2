"""DQN's Q-network, sized by `config.network`: an MLP (`network.hidden_layers`)
on the flattened observation; on uint8 images (MinAtar's grids, Atari's
frames) a conv torso comes first when `network.conv_channels` names one
(agents/images.py), and the images are scaled to [0, 1] either way."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.jax import networks as networks_lib
from acme.jax import utils
import haiku as hk
import ml_collections

from acme_launch.agents import images


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec
                  ) -> networks_lib.FeedForwardNetwork:
  """(A conv torso on images, then) an MLP from observations to one
  Q-value per action."""
  num_actions = environment_spec.actions.num_values
  layers = list(config.network.hidden_layers) + [num_actions]
  layout = images.images(config.network, environment_spec.observations)

  def q_network(observation):
    if layout is not None:
      return hk.nets.MLP(layers)(
          images.torso(config.network, layout, observation))
    return hk.Sequential([hk.Flatten(), hk.nets.MLP(layers)])(observation)

  transformed = hk.without_apply_rng(hk.transform(q_network))
  dummy_observation = utils.add_batch_dim(
      utils.zeros_like(environment_spec.observations))
  return networks_lib.FeedForwardNetwork(
      init=lambda key: transformed.init(key, dummy_observation),
      apply=transformed.apply)
