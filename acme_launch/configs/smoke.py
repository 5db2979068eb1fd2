"""Tiny PPO run for tests: one actor, small networks, a 6,000-step budget."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = experiment_config.base_config(
      agent='ppo', env_name='HalfCheetah-v4', max_actor_steps=6_000,
      num_actors=1, eval_every_steps=1_000)
  config.env_max_episode_steps = 100
  config.log_every_seconds = 1.0

  config.ppo = ml_collections.ConfigDict()
  config.ppo.unroll_length = 8
  config.ppo.batch_size = 8
  config.ppo.num_minibatches = 2
  config.ppo.num_epochs = 1
  config.ppo.learning_rate = 3e-4
  config.ppo.entropy_cost = 0.0
  config.ppo.value_cost = 0.5
  config.ppo.discount = 0.99
  config.ppo.gae_lambda = 0.95
  config.ppo.ppo_clipping_epsilon = 0.2
  config.ppo.max_gradient_norm = 0.5
  config.ppo.normalize_rewards = False  # Scaled replay rewards (ppo_mujoco).
  config.ppo.final_observation_rows = True  # Acme's sequence layout (ppo_mujoco).
  config.ppo.max_queue_batches = 2   # Replay queue size, in learner batches.
  config.ppo.variable_update_period = 10

  config.network = ml_collections.ConfigDict()
  config.network.policy_layers = (16, 16)
  config.network.value_layers = (16, 16)
  # Off here: tests/test_ppo_normalization.py runs smoke with it on.
  config.network.normalize_observations = False
  return config
