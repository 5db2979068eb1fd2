"""Acme JAX D4PG with Reverb replay on a gym MuJoCo task (HalfCheetah-v4 by default)."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = experiment_config.base_config(
      agent='d4pg', env_name='HalfCheetah-v4', max_actor_steps=1_000_000,
      num_actors=2, eval_every_steps=50_000)
  config.eval_episodes = 5

  # Defaults follow Acme's run_d4pg.py baseline for gym locomotion.
  config.d4pg = ml_collections.ConfigDict()
  config.d4pg.batch_size = 256            # Transitions per SGD step.
  config.d4pg.learning_rate = 3e-4        # Policy and critic.
  config.d4pg.discount = 0.99
  config.d4pg.n_step = 5                  # N-step returns in the transitions.
  config.d4pg.sigma = 0.2                 # Actors' Gaussian exploration noise.
  config.d4pg.target_update_period = 100  # Learner steps between target copies.
  config.d4pg.clipping = True             # Clip gradients to global norm 40.
  # Replay (Reverb) and its rate limiter (SampleToInsertRatio).
  config.d4pg.min_replay_size = 1_000     # Inserts before the learner samples.
  config.d4pg.max_replay_size = 1_000_000  # FIFO beyond this.
  config.d4pg.samples_per_insert = 32.0   # Sampled transitions per insert.
  config.d4pg.samples_per_insert_tolerance_rate = 0.1
  config.d4pg.prefetch_size = 4
  config.d4pg.num_sgd_steps_per_step = 1  # SGD steps per learner step.

  config.network = ml_collections.ConfigDict()
  config.network.policy_layers = (256, 256, 256)
  config.network.critic_layers = (256, 256, 256)
  # Support of the distributional critic; gym locomotion returns are unscaled.
  config.network.vmin = -1000.0
  config.network.vmax = 1000.0
  config.network.num_atoms = 51
  return config
