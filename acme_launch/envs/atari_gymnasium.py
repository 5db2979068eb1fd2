"""The atari family on the gym backend: ale-py's games under Gymnasium's own
Atari wrappers, set to atari.py's protocol, as dm_env.

The stack, from the emulator up:

  ale-py's ALE/NAME-v5   frameskip 1 (the wrapper above skips), the
                         protocol's sticky-action probability (0, where
                         ale-py's v5 default is 0.25), the minimal action
                         set, no frame limit of its own
  _KeepGame              a reset after a lost life keeps the game going
  AtariPreprocessing     Gymnasium's: 1-30 no-op frames at reset, 4 frames
                         per action with the last two max-pooled, 84x84
                         grayscale by area resize, uint8
  TransformReward        actors only: the reward's sign
  FrameStackObservation  Gymnasium's: the last 4 frames, (4, 84, 84)
  _Episodes              the time limit, counted in agent steps from the
                         game's start; actors only: a lost life ends an
                         episode

EnvPool's Atari does each of these steps in the same order (its
atari_env.h), so with the same no-op counts and actions both backends give
the same frames and rewards, bit for bit, but for the newest frame of a
game's very last observation (Gymnasium's wrapper stops reading the screen
when the game ends within the 4 frames; docs/environments.md#atari). Gymnasium's own life-loss option
(`terminal_on_life_loss`) is not used: it looks at lives inside the frame
skip and its next reset starts a new game, where EnvPool looks after the
4 frames and plays on from the lost life (with no-ops, keeping the frame
stack). `_Episodes` and `_KeepGame` do it EnvPool's way.
"""

import gymnasium
import numpy as np

from acme_launch.envs.families import GymnasiumEnvironment


class _KeepGame(gymnasium.Wrapper):
  """reset() after `keep_game` was set plays on in the same game (unless
  it is over), and says whether it did in `kept`."""

  def __init__(self, env):
    super().__init__(env)
    self.keep_game = False
    self.kept = False

  def reset(self, *, seed=None, options=None):
    keep, self.keep_game = self.keep_game, False
    self.kept = keep and not self.env.unwrapped.ale.game_over()
    if self.kept:
      return self.env.unwrapped._get_obs(), {}
    return self.env.reset(seed=seed, options=options)


class _Episodes(gymnasium.Wrapper):
  """The time limit, from the game's start; with `episodic_life`, a lost
  life ends the episode (terminated) and the next reset plays on: no-ops,
  one new frame pushed on the stack."""

  def __init__(self, env, keep_game: _KeepGame, limit: int,
               episodic_life: bool):
    super().__init__(env)
    self._keep_game = keep_game
    self._limit = limit
    self._episodic_life = episodic_life
    self._ale = env.unwrapped.ale
    self._steps = 0  # Agent steps since the game started.
    self._lives = 0
    self._play_on = False

  def reset(self, *, seed=None, options=None):
    if self._play_on:
      self._play_on = False
      self._keep_game.keep_game = True
      # Under the frame stack: AtariPreprocessing's no-ops and one frame.
      frame, info = self.env.env.reset()
      stack = self.env.obs_queue  # FrameStackObservation's last frames.
      if not self._keep_game.kept:  # The game was over: a new one.
        self._steps = 0
        stack.extend([frame] * (stack.maxlen - 1))
      stack.append(frame)
      observation = np.stack(stack)
    else:
      self._steps = 0
      observation, info = self.env.reset(seed=seed, options=options)
    self._lives = self._ale.lives()
    return observation, info

  def step(self, action):
    observation, reward, terminated, truncated, info = self.env.step(action)
    self._steps += 1
    truncated = truncated or self._steps >= self._limit
    lives = self._ale.lives()
    if self._episodic_life and not terminated and 0 < lives < self._lives:
      terminated = True
      self._play_on = not truncated  # At the limit a new game starts.
    self._lives = lives
    return observation, reward, terminated, truncated, info


def quiet_ale() -> None:
  """ALE prints a banner each time an emulator starts: errors only."""
  import ale_py
  ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)


def make_gymnasium_game(ale_id: str, protocol, max_episode_steps: int = 0,
                        evaluation: bool = False):
  """The game ale-py registers as `ale_id` ('ALE/Pong-v5'), as a Gymnasium
  environment under `protocol` (atari.PROTOCOL, read when called; atari.py
  passes both). `evaluation`: whole games, real scores."""
  quiet_ale()
  environment = gymnasium.make(
      ale_id, frameskip=1,
      repeat_action_probability=protocol['repeat_action_probability'],
      full_action_space=protocol['full_action_space'],
      max_num_frames_per_episode=0,  # _Episodes counts agent steps instead.
      obs_type='grayscale' if protocol['gray_scale'] else 'rgb',
      disable_env_checker=True)
  keep_game = _KeepGame(environment)
  environment = gymnasium.wrappers.AtariPreprocessing(
      keep_game, noop_max=protocol['noop_max'],
      frame_skip=protocol['frame_skip'],
      screen_size=(protocol['img_width'], protocol['img_height']),
      terminal_on_life_loss=False, grayscale_obs=protocol['gray_scale'],
      scale_obs=False)
  if not evaluation:
    environment = gymnasium.wrappers.TransformReward(environment, np.sign)
  environment = gymnasium.wrappers.FrameStackObservation(
      environment, protocol['stack_num'])
  return _Episodes(
      environment, keep_game,
      limit=int(max_episode_steps) or protocol['max_episode_steps'],
      episodic_life=not evaluation)


def make(ale_id: str, protocol, seed: int, max_episode_steps: int = 0,
         evaluation: bool = False) -> GymnasiumEnvironment:
  """One game as dm_env (Gymnasium's terminated: discount 0, truncated:
  discount 1), seeded once: ALE's and the no-ops' streams."""
  return GymnasiumEnvironment(
      make_gymnasium_game(ale_id, protocol, max_episode_steps, evaluation),
      seed)
