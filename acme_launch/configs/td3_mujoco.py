"""Acme JAX TD3 with Reverb replay on a gym MuJoCo task (HalfCheetah-v4 by default)."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = experiment_config.base_config(
      agent='td3', env_name='HalfCheetah-v4', max_actor_steps=1_000_000,
      num_actors=2, eval_every_steps=50_000)
  config.eval_episodes = 5

  # Defaults follow Acme's TD3Config and its run_td3.py baseline.
  config.td3 = ml_collections.ConfigDict()
  config.td3.batch_size = 256              # Transitions per SGD step.
  config.td3.policy_learning_rate = 3e-4
  config.td3.critic_learning_rate = 3e-4
  config.td3.discount = 0.99
  config.td3.n_step = 1
  config.td3.sigma = 0.1                   # Actors' Gaussian exploration noise.
  config.td3.delay = 2                     # Critic updates per policy update.
  config.td3.target_sigma = 0.2            # Target policy smoothing noise...
  config.td3.noise_clip = 0.5              # ...clipped to this.
  config.td3.tau = 0.005                   # Target network smoothing.
  # Replay (Reverb) and its rate limiter (SampleToInsertRatio).
  config.td3.min_replay_size = 1_000       # Inserts before the learner samples.
  config.td3.max_replay_size = 1_000_000   # FIFO beyond this.
  config.td3.samples_per_insert = 256.0    # Sampled transitions per insert.
  config.td3.samples_per_insert_tolerance_rate = 0.1
  config.td3.prefetch_size = 4
  config.td3.num_sgd_steps_per_step = 1    # SGD steps per learner step.

  config.network = ml_collections.ConfigDict()
  config.network.hidden_layers = (256, 256, 256)  # Policy and both critics.
  return config
