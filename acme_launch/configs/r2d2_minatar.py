"""Acme JAX R2D2 on MinAtar Breakout: recurrent replay on a CPU, 2M steps."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  # MinAtar's protocol (sticky actions 0.1, difficulty ramping, a 10,000-step
  # limit): envs/minatar.py, docs/environments.md#minatar. Any of its games:
  # --config.env_name=minatar:space_invaders, ...
  config = experiment_config.base_config(
      agent='r2d2', env_name='minatar:breakout', max_actor_steps=2_000_000,
      num_actors=2, eval_every_steps=50_000)
  # Acme's recurrent actor and adder: one game per actor process. The
  # learner sets the pace, not the actors; --config.envs_per_actor=8 steps
  # eight games in one process, about 1.4x the env steps per CPU second
  # (docs/agents.md#r2d2).
  config.envs_per_actor = 1
  config.eval_episodes = 5

  # Acme's R2D2Config fields; sequences shorter than Atari's, for games
  # whose frames show motion (MinAtar's trail channels).
  config.r2d2 = ml_collections.ConfigDict()
  config.r2d2.discount = 0.99
  config.r2d2.burn_in_length = 4      # Steps that only warm up the LSTM state.
  config.r2d2.trace_length = 20       # Steps trained on after the burn-in.
  config.r2d2.sequence_period = 10    # Sequences overlap by half.
  config.r2d2.bootstrap_n = 3         # N-step double-Q targets.
  config.r2d2.learning_rate = 1e-4
  config.r2d2.target_update_period = 500  # Learner steps between copies.
  config.r2d2.variable_update_period = 50  # Actor steps between fetches.
  config.r2d2.evaluation_epsilon = 1e-3
  # Each actor draws an epsilon per episode from Ape-X's 0.4**[1..8] set.
  config.r2d2.num_epsilons = 256
  config.r2d2.clip_rewards = False    # MinAtar's rewards are small already.
  config.r2d2.batch_size = 32         # Sequences per SGD step.
  # Replay (Reverb, prioritized), in sequences: 10k sequences 10 apart are
  # the 100k steps of the MinAtar paper's replay.
  config.r2d2.min_replay_size = 500
  config.r2d2.max_replay_size = 10_000
  # Each sequence sampled about 4 times: each step trained on about 8.
  config.r2d2.samples_per_insert = 4.0
  config.r2d2.samples_per_insert_tolerance_rate = 0.1
  config.r2d2.priority_exponent = 0.9
  config.r2d2.importance_sampling_exponent = 0.6
  config.r2d2.max_priority_weight = 0.9
  config.r2d2.prefetch_size = 1
  config.r2d2.num_parallel_calls = 1  # Reverb sampling threads.

  # The MinAtar paper's torso (one 3x3 convolution of 16 channels, stride
  # 1) on the (10, 10, C) grid, channels last; LSTM 128, duelling head 128.
  config.network = ml_collections.ConfigDict()
  config.network.channels_last = True
  config.network.conv_channels = (16,)
  config.network.conv_kernels = (3,)
  config.network.conv_strides = (1,)
  config.network.lstm_size = 128
  config.network.head_hidden_layers = (128,)
  return config
