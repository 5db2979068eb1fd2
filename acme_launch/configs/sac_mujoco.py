"""Acme JAX SAC with Reverb replay on a gym MuJoCo task (HalfCheetah-v4 by default)."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = experiment_config.base_config(
      agent='sac', env_name='HalfCheetah-v4', max_actor_steps=1_000_000,
      num_actors=2, eval_every_steps=50_000)
  config.eval_episodes = 5

  # Defaults follow Acme's run_sac.py baseline for gym locomotion.
  config.sac = ml_collections.ConfigDict()
  config.sac.batch_size = 256            # Transitions per SGD step.
  config.sac.learning_rate = 3e-4        # Policy, critic and temperature.
  config.sac.discount = 0.99
  config.sac.n_step = 2                  # N-step returns in the transitions.
  config.sac.tau = 0.005                 # Target network smoothing.
  config.sac.reward_scale = 1.0
  # Target entropy = this * action dimensions (-1: Acme's usual -|A|).
  config.sac.target_entropy_per_dimension = -1.0
  config.sac.adaptive_entropy = True     # Learn the entropy coefficient...
  config.sac.entropy_coefficient = 0.2   # ...or, if False, fix it to this.
  # Replay (Reverb) and its rate limiter (SampleToInsertRatio).
  config.sac.min_replay_size = 10_000    # Inserts before the learner samples.
  config.sac.max_replay_size = 1_000_000  # FIFO beyond this.
  config.sac.samples_per_insert = 256.0  # Sampled transitions per insert.
  config.sac.samples_per_insert_tolerance_rate = 0.1
  config.sac.prefetch_size = 4
  config.sac.num_sgd_steps_per_step = 1  # SGD steps per learner step.

  config.network = ml_collections.ConfigDict()
  config.network.hidden_layers = (256, 256, 256)  # Policy and both critics.
  return config
