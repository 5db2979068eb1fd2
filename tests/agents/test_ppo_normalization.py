"""PPO observation normalization: statistics in the parameters, merged exactly
by the learner, untouched by the optimizer (saved and restored with it in a
real run: tests/e2e/agents/test_ppo_normalization.py)."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import jax
import jax.numpy as jnp
import numpy as np
import optax

from acme_launch.agents.ppo import normalization as ppo_adapter


def test_merged_statistics_equal_those_of_all_batches_at_once():
  rng = np.random.default_rng(0)
  batches = [rng.normal(3.0, 2.0, size=(n, 5)) for n in (7, 100, 1, 33)]
  mean, var, count = np.zeros(5), np.ones(5), 0.0
  for batch in batches:
    mean, var, count = ppo_adapter.merge_statistics(mean, var, count, batch)
  everything = np.concatenate(batches)
  np.testing.assert_allclose(mean, everything.mean(axis=0))
  np.testing.assert_allclose(var, everything.var(axis=0))
  assert count == len(everything)


def _networks():
  spec = specs.EnvironmentSpec(
      observations=specs.Array((4,), np.float32),
      actions=specs.BoundedArray((2,), np.float32, -1.0, 1.0),
      rewards=specs.Array((), np.float32), discounts=specs.Array((), np.float32))
  return ppo_adapter.make_normalized_networks(spec, (8,), (8,))


def test_the_network_normalizes_with_the_statistics_in_its_parameters():
  networks = _networks()
  params = networks.network.init(jax.random.PRNGKey(0))
  mean, var = jnp.array([1.0, -2.0, 3.0, 0.5]), jnp.array([4.0, 0.25, 1.0, 9.0])
  shifted = dict(params)
  shifted[ppo_adapter.NORMALIZER] = {**params[ppo_adapter.NORMALIZER],
                                     'mean': mean, 'var': var}
  x = jnp.array([[2.0, -1.0, 0.0, 3.5]])
  dist_a, value_a = networks.network.apply(shifted, x)
  dist_b, value_b = networks.network.apply(params, (x - mean) / jnp.sqrt(var + 1e-8))
  np.testing.assert_allclose(value_a, value_b, rtol=1e-5)
  np.testing.assert_allclose(dist_a.mean(), dist_b.mean(), rtol=1e-5)


def test_the_optimizer_leaves_the_statistics_as_they_are():
  networks = _networks()
  params = networks.network.init(jax.random.PRNGKey(0))
  params[ppo_adapter.NORMALIZER]['mean'] = jnp.full((4,), 0.7)
  x = jnp.ones((3, 4))

  def loss(p):
    dist, value = networks.network.apply(p, x)
    return jnp.sum(value**2) + jnp.sum(dist.mean()**2)

  grads = jax.grad(loss)(params)
  for leaf in jax.tree_util.tree_leaves(grads[ppo_adapter.NORMALIZER]):
    assert not np.any(np.asarray(leaf))
  optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.scale_by_adam(),
                          optax.scale(-1e-1))   # As PPOBuilder builds it.
  state = optimizer.init(params)
  for _ in range(3):
    updates, state = optimizer.update(jax.grad(loss)(params), state)
    params = optax.apply_updates(params, updates)
  np.testing.assert_array_equal(params[ppo_adapter.NORMALIZER]['mean'], 0.7)
