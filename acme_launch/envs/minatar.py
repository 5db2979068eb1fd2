"""The minatar family: MinAtar's five games (Young & Tian, 2019) as dm_env.

`minatar:breakout` is `minatar.Environment('breakout')`. MinAtar's games are
Atari analogues on a 10x10 grid, one boolean channel per kind of object, and
small enough to learn on a CPU. The protocol is the one the MinAtar paper
uses, MinAtar's own defaults, the same for actors and evaluators: sticky
actions with probability 0.1 (the game repeats the previous action instead
of the agent's), difficulty ramping on (asterix, seaquest and space_invaders
speed up as play goes on), the game's minimal action set, real rewards.

Observations are MinAtar's (10, 10, C) grid, channels last, as uint8 0/1
(a BoundedArray with maximum 1): a quarter of float32's bytes in replay and
on the way to it, exact, and networks scale by the spec's maximum.

Freeway's clock ends the game (discount 0) on its 2,501st step; the other
games end only when the agent loses, so every game runs under a limit of
`MAX_EPISODE_STEPS` agent steps (`config.env_max_episode_steps` > 0
replaces it), which ends the episode with discount 1. The launcher's seed seeds MinAtar's one random
stream (game and sticky actions) when the environment is made. Nothing
here imports minatar until a game is made; `games()` reads the installed
package's game modules without importing it.
"""

import importlib.util
import os
from typing import List

import dm_env
from dm_env import specs
import numpy as np

from acme_launch import errors
from acme_launch.envs import registry

FAMILY = 'minatar'
# MinAtar's own defaults, as in the paper (Young & Tian, 2019).
PROTOCOL = {'sticky_action_prob': 0.1, 'difficulty_ramping': True}
# Agent steps before an episode is cut (Freeway's clock: 2,501).
MAX_EPISODE_STEPS = 10_000
_ZERO, _ONE = np.float32(0.0), np.float32(1.0)


def games() -> List[str]:
  """The games of the installed minatar package ('asterix', ...), from
  its `environments` folder: importing minatar would import matplotlib."""
  spec = importlib.util.find_spec('minatar')
  if spec is None or not spec.submodule_search_locations:
    return []
  folder = os.path.join(list(spec.submodule_search_locations)[0],
                        'environments')
  if not os.path.isdir(folder):
    return []
  return sorted(name[:-3] for name in os.listdir(folder)
                if name.endswith('.py') and not name.startswith('_'))


def unknown_game_message(env_name: str) -> str:
  return (f'config.env_name {env_name!r}: unknown minatar game; choose one '
          f'of: {", ".join(f"{FAMILY}:{g}" for g in games())}')


class MinAtarEnvironment(dm_env.Environment):
  """One MinAtar game: discrete actions over its minimal action set,
  (10, 10, C) uint8 observations, an episode cut at `max_episode_steps`
  (0: MAX_EPISODE_STEPS) with discount 1, a lost game with discount 0.

  Rewards and discounts are float32 already: it needs no
  SinglePrecisionWrapper, whose per-step conversions would cost more than
  MinAtar's own step."""

  def __init__(self, game: str, seed: int, max_episode_steps: int = 0):
    import minatar
    self._game = minatar.Environment(game, **PROTOCOL)
    self._game.seed(int(seed))
    self._actions = list(self._game.minimal_action_set())
    self._limit = int(max_episode_steps) or MAX_EPISODE_STEPS
    self._steps = 0
    self._reset_next_step = True
    self._observation_spec = specs.BoundedArray(
        tuple(self._game.state_shape()), np.uint8, 0, 1, name='observation')
    self._action_spec = specs.DiscreteArray(len(self._actions), name='action')

  def _observation(self) -> np.ndarray:
    return self._game.state().astype(np.uint8)

  def reset(self) -> dm_env.TimeStep:
    self._game.reset()
    self._steps = 0
    self._reset_next_step = False
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:
      return self.reset()
    reward, terminal = self._game.act(self._actions[int(action)])
    self._steps += 1
    reward = np.float32(reward)
    if terminal:
      self._reset_next_step = True
      return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ZERO,
                             self._observation())
    if self._steps >= self._limit:
      self._reset_next_step = True
      return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ONE,
                             self._observation())
    return dm_env.TimeStep(dm_env.StepType.MID, reward, _ONE,
                           self._observation())

  def observation_spec(self) -> specs.BoundedArray:
    return self._observation_spec

  def action_spec(self) -> specs.DiscreteArray:
    return self._action_spec

  def reward_spec(self) -> specs.Array:
    return specs.Array((), np.float32, name='reward')

  def discount_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((), np.float32, 0.0, 1.0, name='discount')


def check(name: str, env_name: str, backend: str) -> None:
  if name not in games():
    raise errors.LaunchError(unknown_game_message(env_name))


# Discrete actions and float32 already: no wrappers.
MINATAR = registry.register_family(registry.Family(
    FAMILY, ('gym',), ('minatar',), check, MinAtarEnvironment,
    max_episode_steps=MAX_EPISODE_STEPS, wrap=False, example='minatar:GAME',
    backend_error='config.env_backend {backend} does not run minatar games '
    '(EnvPool has none): use config.env_backend=gym'))
