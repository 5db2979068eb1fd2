"""A test-only gym task that any learning agent improves on at once, and one
that cannot learn (learning rate 0) does not: for early stopping's tests.

`--config.env_name=tests.bandit_env:PushBandit-v0`: gym's `module:id` form
imports this module wherever the task is made, which registers the id. The
observation is a constant; each step's reward is the first action
component, clipped to [-1, 1]; an episode is `config.env_max_episode_steps`
steps. A policy's return is that many times its mean action: PPO's moves
up within a few updates, an untrained one stays near its initial mean.
"""

import gym
import numpy as np

TASK = 'PushBandit-v0'
# A sweep of the smoke config on this task, episodes of 10 steps: one
# point learns (its return near 10 within 2,000 steps), one cannot (0).
SWEEP_FLAGS = ('--config=smoke',
               '--config.env_name=tests.bandit_env:PushBandit-v0',
               '--config.env_max_episode_steps=10',
               '--sweep=ppo.learning_rate=0.003,0.0')


class PushBandit(gym.Env):

  def __init__(self):
    self.observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

  def reset(self, *, seed=None, options=None, return_info=False):
    super().reset(seed=seed)
    observation = np.ones((1,), np.float32)
    return (observation, {}) if return_info else observation

  def step(self, action):
    reward = float(np.clip(np.asarray(action, np.float32)[0], -1.0, 1.0))
    return np.ones((1,), np.float32), reward, False, {}


if TASK not in gym.envs.registry:
  gym.register(id=TASK, entry_point=PushBandit, max_episode_steps=1000)
