"""Acme JAX DQN on CartPole-v1: a discrete-action first-run demo, 100k steps."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = experiment_config.base_config(
      agent='dqn', env_name='CartPole-v1', max_actor_steps=100_000,
      num_actors=1, eval_every_steps=5_000)
  config.eval_episodes = 5

  config.dqn = ml_collections.ConfigDict()
  config.dqn.batch_size = 64               # Transitions per SGD step.
  config.dqn.learning_rate = 1e-3
  config.dqn.adam_eps = 1e-8
  config.dqn.discount = 0.99
  config.dqn.n_step = 3                    # N-step returns in the transitions.
  config.dqn.target_update_period = 200    # Learner steps between target copies.
  config.dqn.epsilon = 0.05                # Actors' epsilon-greedy exploration.
  config.dqn.eval_epsilon = 0.0            # The evaluator's (0: greedy).
  # Replay (Reverb, prioritized) and its rate limiter (SampleToInsertRatio).
  config.dqn.min_replay_size = 1_000       # Inserts before the learner samples.
  config.dqn.max_replay_size = 100_000     # FIFO beyond this.
  config.dqn.samples_per_insert = 16.0     # Sampled transitions per insert.
  config.dqn.samples_per_insert_tolerance_rate = 0.1
  config.dqn.priority_exponent = 0.6
  config.dqn.importance_sampling_exponent = 0.2
  config.dqn.prefetch_size = 4
  config.dqn.num_sgd_steps_per_step = 1    # SGD steps per learner step.

  config.network = ml_collections.ConfigDict()
  config.network.hidden_layers = (64, 64)  # Q-network MLP.
  return config
