"""A user's own agent and environment: dueling DQN on the cue corridor.

Neither is in acme-launch: both live in `my_project/`, beside this file,
which the launcher puts on the path of every node. Run from the checkout:

  python launch.py --config=examples/dueling_dqn_corridor.py
"""

from acme_launch.config import base_config
import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = base_config(
      agent='my_project.agents.dueling_dqn',
      env_name='my_project.envs.cue_corridor:make_env',
      max_actor_steps=50_000, num_actors=2, eval_every_steps=5_000)
  config.eval_episodes = 20
  config.corridor_length = 3               # Read by make_env(seed, config).

  config.dueling_dqn = ml_collections.ConfigDict()
  config.dueling_dqn.hidden_layers = (64, 64)
  config.dueling_dqn.learning_rate = 1e-3
  config.dueling_dqn.batch_size = 64
  config.dueling_dqn.n_step = 1
  config.dueling_dqn.discount = 0.99
  config.dueling_dqn.epsilon = 0.1
  config.dueling_dqn.min_replay_size = 500
  config.dueling_dqn.max_replay_size = 50_000
  config.dueling_dqn.samples_per_insert = 8.0
  return config
