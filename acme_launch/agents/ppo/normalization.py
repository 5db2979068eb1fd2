"""PPO's observation normalization (`network.normalize_observations`).

The running mean and variance are parameters of the network (module
`observation_normalizer`), so actors, evaluators and the learner use the
same statistics through the variable fetches they already make, and the
learner checkpoint saves and restores them. Their gradient is stopped, and
with a zero gradient Adam leaves them as they are; only the learner changes
them, after each step, from the observations of the batch it trained on.
Actors act with the statistics of their last fetch, as they do with the
weights.
"""

from typing import Iterator, List, Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme import specs
from acme.agents.jax import ppo
from acme.jax import networks as networks_lib
from acme.jax import utils
import haiku as hk
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import reverb


def normalizes(config: ml_collections.ConfigDict) -> bool:
  """Whether `network.normalize_observations` is on."""
  return bool(config.network.get('normalize_observations', False))


NORMALIZER = 'observation_normalizer'
_NORMALIZED_CLIP = 10.0   # Normalized observations are clipped to +-10.
_VARIANCE_EPSILON = 1e-8


class ObservationNormalizer(hk.Module):
  """(x - mean) / sqrt(var), from statistics held as parameters."""

  def __init__(self):
    super().__init__(name=NORMALIZER)

  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    size = x.shape[-1]
    mean = hk.get_parameter('mean', [size], init=jnp.zeros)
    var = hk.get_parameter('var', [size], init=jnp.ones)
    hk.get_parameter('count', [], init=jnp.zeros)  # Observations merged.
    x = (x - jax.lax.stop_gradient(mean)) / jnp.sqrt(
        jax.lax.stop_gradient(var) + _VARIANCE_EPSILON)
    return jnp.clip(x, -_NORMALIZED_CLIP, _NORMALIZED_CLIP)


def make_normalized_networks(environment_spec: specs.EnvironmentSpec,
                             policy_layers, value_layers) -> ppo.PPONetworks:
  """Acme's gym PPO networks (tanh MLPs, diagonal Gaussian policy head) with
  the observations normalized first."""
  num_dimensions = int(np.prod(environment_spec.actions.shape))

  def forward(observations):
    x = ObservationNormalizer()(utils.batch_concat(observations))
    policy = hk.Sequential([
        hk.nets.MLP(policy_layers, activation=jnp.tanh),
        networks_lib.MultivariateNormalDiagHead(num_dimensions)])
    value = hk.Sequential([
        hk.nets.MLP(value_layers, activation=jnp.tanh),
        hk.Linear(1), lambda v: jnp.squeeze(v, axis=-1)])
    return policy(x), value(x)

  forward = hk.without_apply_rng(hk.transform(forward))
  dummy = utils.add_batch_dim(utils.zeros_like(environment_spec.observations))
  return ppo.make_ppo_networks(networks_lib.FeedForwardNetwork(
      lambda key: forward.init(key, dummy), forward.apply))


def merge_statistics(mean: np.ndarray, var: np.ndarray, count: float,
                     batch: np.ndarray):
  """Running mean, variance and count with a [N, D] batch merged in (Chan et
  al.'s parallel update, exact for any batch sizes)."""
  n = batch.shape[0]
  total = count + n
  delta = batch.mean(axis=0) - mean
  new_mean = mean + delta * (n / total)
  sum_of_squares = var * count + batch.var(axis=0) * n + delta**2 * (count * n / total)
  return new_mean, sum_of_squares / total, total


class ObservationTap(Iterator[reverb.ReplaySample]):
  """The learner's dataset, keeping the observations of the last batch."""

  def __init__(self, iterator: Iterator[reverb.ReplaySample]):
    self._iterator = iterator
    self.observations: Optional[np.ndarray] = None

  def __next__(self) -> reverb.ReplaySample:
    sample = next(self._iterator)
    leaves = jax.tree_util.tree_leaves(sample.data.observation)
    # [batch, time, ...] leaves -> [batch x time, D], in batch_concat's order.
    rows = leaves[0].shape[0] * leaves[0].shape[1]
    self.observations = np.concatenate(
        [np.asarray(leaf, np.float64).reshape(rows, -1) for leaf in leaves],
        axis=-1)
    return sample


class ObservationStatsLearner(core.Learner):
  """Acme's PPO learner, merging each batch into the normalizer afterwards."""

  def __init__(self, learner: ppo.PPOLearner, tap: ObservationTap):
    self._learner = learner
    self._tap = tap

  def step(self) -> None:
    self._learner.step()
    state = self._learner.save()
    stats = state.params[NORMALIZER]
    mean, var, count = merge_statistics(
        np.asarray(stats['mean'], np.float64), np.asarray(stats['var'], np.float64),
        float(stats['count']), self._tap.observations)
    params = dict(state.params)
    params[NORMALIZER] = {
        'mean': jnp.asarray(mean, jnp.float32),
        'var': jnp.asarray(var, jnp.float32),
        'count': jnp.asarray(count, jnp.float32)}
    self._learner.restore(state._replace(params=params))

  def get_variables(self, names: List[str]) -> List[networks_lib.Params]:
    return self._learner.get_variables(names)

  def save(self):
    return self._learner.save()

  def restore(self, state) -> None:
    self._learner.restore(state)
