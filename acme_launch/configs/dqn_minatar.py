"""Acme JAX DQN on MinAtar Breakout: the MinAtar paper's network, 2M steps."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  # MinAtar's protocol: envs/minatar.py, docs/environments.md#minatar.
  config = experiment_config.base_config(
      agent='dqn', env_name='minatar:breakout', max_actor_steps=2_000_000,
      num_actors=1, eval_every_steps=50_000)
  config.eval_episodes = 5

  # Near the MinAtar paper's DQN (batch 32, target copied every 1,000
  # updates, 100k-step replay, learning starts at 5k steps), with Acme's
  # prioritized double-Q loss, n-step returns and Adam.
  config.dqn = ml_collections.ConfigDict()
  config.dqn.batch_size = 32               # Transitions per SGD step.
  config.dqn.learning_rate = 2.5e-4
  config.dqn.adam_eps = 3.125e-4
  config.dqn.discount = 0.99
  config.dqn.n_step = 3                    # N-step returns in the transitions.
  config.dqn.target_update_period = 1_000  # Learner steps between target copies.
  config.dqn.epsilon = 0.05                # Actors' epsilon-greedy exploration.
  # True: each environment explores with its own fixed Ape-X epsilon instead
  # (needs envs_per_actor of 2 or more; dqn_atari's choice).
  config.dqn.apex_epsilons = False
  config.dqn.eval_epsilon = 0.0            # The evaluator's (0: greedy).
  config.dqn.min_replay_size = 5_000       # Inserts before the learner samples.
  config.dqn.max_replay_size = 100_000     # FIFO beyond this.
  config.dqn.samples_per_insert = 8.0      # Sampled transitions per insert.
  config.dqn.samples_per_insert_tolerance_rate = 0.1
  config.dqn.priority_exponent = 0.6
  config.dqn.importance_sampling_exponent = 0.2
  config.dqn.prefetch_size = 4
  config.dqn.num_sgd_steps_per_step = 1    # SGD steps per learner step.

  # The MinAtar paper's network: one 3x3 convolution of 16 channels,
  # stride 1, on the (10, 10, C) grid (channels last), then 128 units.
  config.network = ml_collections.ConfigDict()
  config.network.channels_last = True
  config.network.conv_channels = (16,)
  config.network.conv_kernels = (3,)
  config.network.conv_strides = (1,)
  config.network.hidden_layers = (128,)
  return config
