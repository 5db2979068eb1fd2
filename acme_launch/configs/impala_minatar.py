"""Acme JAX IMPALA on MinAtar Breakout: V-trace actor-critic on a CPU, 5M steps."""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  # MinAtar's protocol (sticky actions 0.1, difficulty ramping, a 10,000-step
  # limit): envs/minatar.py, docs/environments.md#minatar. Any of its games:
  # --config.env_name=minatar:space_invaders, ...
  config = experiment_config.base_config(
      agent='impala', env_name='minatar:breakout', max_actor_steps=5_000_000,
      num_actors=2, eval_every_steps=50_000)
  # Each actor steps 4 games in one batched policy call (docs/agents.md#impala:
  # on 2 cores the learner got 1.8x the SGD steps/s of one game per actor);
  # --config.envs_per_actor=1 runs Acme's own recurrent actor and adder.
  config.envs_per_actor = 4
  config.eval_episodes = 5

  # Acme's IMPALAConfig fields; the IMPALA paper's (Espeholt et al., 2018)
  # where it gives them, Acme's defaults otherwise.
  config.impala = ml_collections.ConfigDict()
  config.impala.discount = 0.99
  config.impala.sequence_length = 20  # Unroll: 19 steps trained + 1 bootstrap.
  config.impala.sequence_period = 0   # 0: sequence_length - 1 (Acme's).
  config.impala.batch_size = 32       # Sequences per SGD step.
  # Acme's optimiser, Adam without momentum (b1 0, b2 0.99): RMSProp-like,
  # as the paper's. A higher rate than Acme's 1e-4 for the small network.
  config.impala.learning_rate = 5e-4
  config.impala.adam_momentum_decay = 0.0
  config.impala.adam_variance_decay = 0.99
  config.impala.entropy_cost = 0.01
  config.impala.baseline_cost = 0.5
  config.impala.max_abs_reward = float('inf')  # MinAtar's rewards are 1.
  config.impala.max_gradient_norm = 40.0
  # The queue: each sequence sampled once; at samples_per_insert 1 the
  # actors wait when the learner falls a batch behind, so the data stays
  # near the learner's policy.
  config.impala.max_queue_size = 320   # 10 batches, Acme's default.
  config.impala.samples_per_insert = 1.0
  config.impala.prefetch_size = 2
  # Actor steps between parameter fetches (Acme's actor: 1,000); V-trace
  # corrects for the lag either way.
  config.impala.variable_update_period = 100

  # The MinAtar paper's torso (one 3x3 convolution of 16 channels, stride
  # 1) on the (10, 10, C) grid, channels last; LSTM 128.
  config.network = ml_collections.ConfigDict()
  config.network.torso = 'conv'
  config.network.channels_last = True
  config.network.conv_channels = (16,)
  config.network.conv_kernels = (3,)
  config.network.conv_strides = (1,)
  config.network.lstm_size = 128
  return config
