"""PPO observation normalization: statistics in the parameters, merged exactly
by the learner, untouched by the optimizer, saved and restored with it."""

import glob
import os
import pickle

import pytest

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import jax
import jax.numpy as jnp
import numpy as np
import optax

from acme_launch.agents.ppo import normalization as ppo_adapter
from tests.conftest import read_json, run_launcher


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


def _normalizer_of_newest_learner_checkpoint(run_dir):
  import tensorflow as tf
  newest = sorted(glob.glob(os.path.join(
      run_dir, 'checkpoints', 'learner', 'ckpt-*.index')))[-1][:-len('.index')]
  state = pickle.loads(tf.train.load_checkpoint(newest).get_tensor(
      'state/.ATTRIBUTES/py_state'))
  return {k: np.asarray(v) for k, v in state.params[ppo_adapter.NORMALIZER].items()}


@pytest.mark.e2e
def test_statistics_are_learned_saved_and_continue_after_resume(workdir):
  run_dir = os.path.join(workdir, 'norm')
  args = ('--config=smoke', '--config.network.normalize_observations=True',
          f'--workdir={workdir}', '--run_name=norm')
  first = run_launcher(*args, '--config.max_actor_steps=3000')
  assert first.returncode == 0, first.stderr[-2000:]
  saved = _normalizer_of_newest_learner_checkpoint(run_dir)
  newest = sorted(glob.glob(os.path.join(run_dir, 'checkpoints', 'learner',
                                         'ckpt-*.digest')))[-1]
  with open(newest) as f:
    saved_digest = f.read()
  # Each learner step merges batch_size (8) sequences of unroll_length + 1
  # (9) observations: counted exactly, never moved by the optimizer.
  assert saved['count'] > 0 and saved['count'] % 72 == 0
  assert np.all(saved['var'] > 0) and np.any(np.abs(saved['mean']) > 1e-3)

  second = run_launcher(*args, '--config.max_actor_steps=6000')
  assert second.returncode == 0, second.stderr[-2000:]
  assert 'resuming from' in second.stdout
  # The whole learner state, statistics included, came back exactly.
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert restore['digest'] == saved_digest
  resumed = _normalizer_of_newest_learner_checkpoint(run_dir)
  assert resumed['count'] > saved['count'] and resumed['count'] % 72 == 0
  assert read_json(os.path.join(run_dir, 'summary.json'))['final_eval_episodes'] == 10
