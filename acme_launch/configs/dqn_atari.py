"""Ape-X-style DQN on an Atari game (Pong by default), on EnvPool: several
batched actors, each environment with its own fixed epsilon, prioritized
n-step replay."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  # Atari's protocol (frames, noop starts, life loss and reward clipping for
  # actors only): envs/atari.py, docs/environments.md#atari.
  config = experiment_config.base_config(
      agent='dqn', env_name='atari:Pong', max_actor_steps=10_000_000,
      num_actors=4, eval_every_steps=100_000)
  config.env_backend = 'envpool'  # Or gym: Gymnasium + ale-py, same protocol.
  config.envs_per_actor = 8       # 32 environments, 32 epsilons.
  config.eval_episodes = 1        # Whole games, up to 27k steps each.

  # Ape-X's choices where a CPU-sized run allows them (Horgan et al., 2018):
  # per-environment epsilons 0.4**(1 + 7 i / (N - 1)), 3-step double-Q
  # targets, proportional prioritization (0.6) with importance weights
  # (0.4), Adam at 6.25e-5 (Rainbow's), a target copy every 2,500 updates.
  config.dqn = ml_collections.ConfigDict()
  config.dqn.apex_epsilons = True          # Overrides epsilon for actors.
  config.dqn.epsilon = 0.01                # Unused while apex_epsilons.
  config.dqn.eval_epsilon = 0.001          # Not 0: a greedy policy can stall.
  config.dqn.batch_size = 32               # Transitions per SGD step.
  config.dqn.learning_rate = 6.25e-5
  config.dqn.adam_eps = 1.5e-4
  config.dqn.discount = 0.99
  config.dqn.n_step = 3
  config.dqn.target_update_period = 2_500  # Learner steps between copies.
  config.dqn.min_replay_size = 50_000      # Inserts before the learner samples.
  config.dqn.max_replay_size = 1_000_000   # Transitions; FIFO beyond this.
  # DQN's own ratio (a batch of 32 every 4 steps): the actors wait for the
  # learner rather than fill replay with experience it never samples.
  config.dqn.samples_per_insert = 8.0
  config.dqn.samples_per_insert_tolerance_rate = 0.1
  config.dqn.priority_exponent = 0.6
  config.dqn.importance_sampling_exponent = 0.4
  config.dqn.prefetch_size = 4
  config.dqn.num_sgd_steps_per_step = 1

  # The Nature-DQN network on EnvPool's (4, 84, 84) frame stacks.
  config.network = ml_collections.ConfigDict()
  config.network.channels_last = False
  config.network.conv_channels = (32, 64, 64)
  config.network.conv_kernels = (8, 4, 3)
  config.network.conv_strides = (4, 2, 1)
  config.network.hidden_layers = (512,)
  return config
