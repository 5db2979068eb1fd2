"""Acme JAX R2D2 on a memory task: CartPole-v1 without its velocities.

`pomdp:CartPole-v1` shows the cart's position and the pole's angle only
(envs/pomdp.py): balancing needs the velocities, which an LSTM can infer
from the last few observations and a feed-forward network cannot. The
feed-forward agent of the same size to compare with is
`dqn_cartpole --config.env_name=pomdp:CartPole-v1
--config.network.hidden_layers=(64,64)` (docs/results.md).
"""

from acme_launch.config import schema as experiment_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = experiment_config.base_config(
      agent='r2d2', env_name='pomdp:CartPole-v1', max_actor_steps=100_000,
      num_actors=1, eval_every_steps=5_000)
  # Acme's recurrent actor and adder: one environment per actor process.
  config.envs_per_actor = 1
  config.eval_episodes = 5

  # Acme's R2D2Config fields.
  config.r2d2 = ml_collections.ConfigDict()
  config.r2d2.discount = 0.99
  config.r2d2.burn_in_length = 8      # Steps that only warm up the LSTM state.
  config.r2d2.trace_length = 20       # Steps trained on after the burn-in.
  config.r2d2.sequence_period = 10    # Sequences overlap by half.
  config.r2d2.bootstrap_n = 3         # N-step double-Q targets.
  config.r2d2.learning_rate = 1e-3
  config.r2d2.target_update_period = 200  # Learner steps between copies.
  config.r2d2.variable_update_period = 20  # Actor steps between fetches.
  config.r2d2.evaluation_epsilon = 0.0
  # Each actor draws an epsilon per episode from Ape-X's 0.4**[1..8] set.
  config.r2d2.num_epsilons = 256
  config.r2d2.clip_rewards = False
  config.r2d2.batch_size = 32         # Sequences per SGD step.
  config.r2d2.min_replay_size = 500   # Sequences before the learner samples.
  config.r2d2.max_replay_size = 10_000
  # Each sequence sampled about 32 times: each step (two sequences hold it)
  # trained on about 64 times. At 8 (each step about 16 times, as
  # dqn_cartpole's transitions) 100k steps were too few to learn.
  config.r2d2.samples_per_insert = 32.0
  config.r2d2.samples_per_insert_tolerance_rate = 0.1
  config.r2d2.priority_exponent = 0.9
  config.r2d2.importance_sampling_exponent = 0.6
  config.r2d2.max_priority_weight = 0.9
  config.r2d2.prefetch_size = 1
  config.r2d2.num_parallel_calls = 1  # Reverb sampling threads.

  # The observation as it is (2 floats), an LSTM of 64 and a duelling head
  # of 64: the size of dqn_cartpole's (64, 64) MLP.
  config.network = ml_collections.ConfigDict()
  config.network.channels_last = True
  config.network.conv_channels = ()
  config.network.conv_kernels = ()
  config.network.conv_strides = ()
  config.network.lstm_size = 64
  config.network.head_hidden_layers = (64,)
  return config
