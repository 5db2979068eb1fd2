"""Acme JAX IMPALA on an Atari game (Pong by default), on EnvPool."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  # Atari's protocol (frames, noop starts, life loss and reward clipping for
  # actors only): envs/atari.py, docs/environments.md#atari.
  config = experiment_config.base_config(
      agent='impala', env_name='atari:Pong', max_actor_steps=50_000_000,
      num_actors=8, eval_every_steps=250_000)
  config.env_backend = 'envpool'  # Or gym: Gymnasium + ale-py, same protocol.
  # Acme's recurrent actor and adder, one game per actor process;
  # --config.envs_per_actor=N steps N games in one batched policy call.
  config.envs_per_actor = 1
  config.eval_episodes = 1        # Whole games, up to 27k steps each.

  # Acme's IMPALAConfig fields, at the IMPALA paper's Atari settings
  # (Espeholt et al., 2018) where it gives them, Acme's defaults otherwise.
  config.impala = ml_collections.ConfigDict()
  config.impala.discount = 0.99
  config.impala.sequence_length = 20  # Unroll: 19 steps trained + 1 bootstrap.
  config.impala.sequence_period = 0   # 0: sequence_length - 1 (Acme's).
  config.impala.batch_size = 32       # Sequences per SGD step.
  # Acme's optimiser, Adam without momentum (b1 0, b2 0.99): RMSProp-like,
  # as the paper's; Acme's learning rate.
  config.impala.learning_rate = 1e-4
  config.impala.adam_momentum_decay = 0.0
  config.impala.adam_variance_decay = 0.99
  config.impala.entropy_cost = 0.01
  config.impala.baseline_cost = 0.5
  # The actors' games clip rewards to their sign already.
  config.impala.max_abs_reward = float('inf')
  config.impala.max_gradient_norm = 40.0
  # The queue: each sequence sampled once; at samples_per_insert 1 the
  # actors wait when the learner falls a batch behind.
  config.impala.max_queue_size = 320  # 10 batches, Acme's default.
  config.impala.samples_per_insert = 1.0
  config.impala.prefetch_size = 2
  # Actor steps between parameter fetches: Acme's actor's 1,000 would lag
  # a fast learner by many updates; V-trace corrects what lag remains.
  config.impala.variable_update_period = 200

  # The IMPALA paper's deep network: Acme's DeepAtariTorso (three residual
  # sections of 16, 32, 32 channels, then 256 units) and an LSTM of 256.
  # Unlike the paper's, the LSTM is not fed the last action and reward.
  config.network = ml_collections.ConfigDict()
  config.network.torso = 'deep'
  config.network.conv_channels = (32, 64, 64)  # For torso='conv' (Nature's).
  config.network.conv_kernels = (8, 4, 3)
  config.network.conv_strides = (4, 2, 1)
  config.network.lstm_size = 256
  return config
