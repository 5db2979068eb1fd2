"""Acme JAX R2D2 on an Atari game (Pong by default), on EnvPool."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  # Atari's protocol (frames, noop starts, life loss and reward clipping for
  # actors only): envs/atari.py, docs/environments.md#atari.
  config = experiment_config.base_config(
      agent='r2d2', env_name='atari:Pong', max_actor_steps=10_000_000,
      num_actors=4, eval_every_steps=100_000)
  config.env_backend = 'envpool'  # Or gym: Gymnasium + ale-py, same protocol.
  # Acme's recurrent actor and adder: one game per actor process.
  config.envs_per_actor = 1
  config.eval_episodes = 1        # Whole games, up to 27k steps each.

  # Acme's R2D2Config fields, at Acme's own Atari baseline
  # (examples/baselines/rl_discrete/run_r2d2.py) where not said otherwise.
  config.r2d2 = ml_collections.ConfigDict()
  config.r2d2.discount = 0.997
  config.r2d2.burn_in_length = 8      # Steps that only warm up the LSTM state.
  config.r2d2.trace_length = 40       # Steps trained on after the burn-in.
  config.r2d2.sequence_period = 20    # Sequences overlap by half.
  config.r2d2.bootstrap_n = 5         # N-step double-Q targets.
  config.r2d2.learning_rate = 1e-4
  config.r2d2.target_update_period = 1200  # Learner steps between copies.
  # Actors fetch parameters every this many steps: R2D2's are large.
  config.r2d2.variable_update_period = 100
  config.r2d2.evaluation_epsilon = 1e-3  # Not 0: a greedy policy can stall.
  # Each actor draws an epsilon per episode from Ape-X's 0.4**[1..8] set.
  config.r2d2.num_epsilons = 256
  config.r2d2.clip_rewards = False    # The actors' games clip them already.
  config.r2d2.batch_size = 32         # Sequences per SGD step.
  # Replay (Reverb, prioritized), in sequences: 50k sequences a period of
  # 20 apart are DQN's 1M agent steps; Reverb stores shared steps once,
  # frames uint8 and compressed. About 11 GB when full, most of it the LSTM
  # state stored with every step (--dry_run prints the estimate).
  config.r2d2.min_replay_size = 10_000
  config.r2d2.max_replay_size = 50_000
  config.r2d2.samples_per_insert = 1.0
  config.r2d2.samples_per_insert_tolerance_rate = 0.1
  config.r2d2.priority_exponent = 0.9
  config.r2d2.importance_sampling_exponent = 0.6
  config.r2d2.max_priority_weight = 0.9
  config.r2d2.prefetch_size = 1
  config.r2d2.num_parallel_calls = 4  # Reverb sampling threads (Acme: 16).

  # R2D2's network: Nature-DQN torso, LSTM 512, duelling head 512.
  config.network = ml_collections.ConfigDict()
  config.network.conv_channels = (32, 64, 64)
  config.network.conv_kernels = (8, 4, 3)
  config.network.conv_strides = (4, 2, 1)
  config.network.lstm_size = 512
  config.network.head_hidden_layers = (512,)
  return config
