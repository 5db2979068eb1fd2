"""The atari family: Atari games on two backends and the one protocol we
run them under (docs/environments.md#atari).

`atari:Pong` is EnvPool's `Pong-v5` on the envpool backend, ale-py's
`ALE/Pong-v5` under Gymnasium's wrappers on the gym backend
(atari_gymnasium.py). The protocol is the DQN/R2D2 one, written here once as
EnvPool's options; on EnvPool its C++ does all of it: 84x84
grayscale frames, 4 of them stacked (channels first, uint8), each agent step
4 emulator frames with the last two max-pooled, up to 30 no-op actions at
reset, no sticky actions, the minimal action set, and a limit of 27,000
agent steps (108,000 frames, 30 minutes of play). Training actors also end
an episode at each lost life and clip rewards to their sign; evaluators
play whole games and report the game's real score. Both backends run the
same ALE emulator on the same ROMs: with the same no-op counts and actions
they give the same frames and rewards, bit for bit (tests/envs/test_atari.py).
Nothing here imports EnvPool or ale-py until a game is made or checked.
"""

from typing import Dict, List

from acme_launch import errors
from acme_launch.envs import registry

FAMILY = 'atari'
_SUFFIX = '-v5'  # EnvPool 0.8.4 registers every game once, as NAME-v5.
_MODULE = 'envpool.atari'  # Registry entries of Atari games import this.
_ALE_PREFIX = 'ALE/'  # ale-py 0.12 registers ALE/NAME-v5 with Gymnasium.

# The protocol, as EnvPool's make() options; the same for every node.
PROTOCOL = {
    'img_height': 84,
    'img_width': 84,
    'gray_scale': True,
    'stack_num': 4,
    'frame_skip': 4,                  # EnvPool max-pools the last two frames.
    'noop_max': 30,
    'repeat_action_probability': 0.0,  # No sticky actions: noop starts alone.
    'full_action_space': False,
    'use_fire_reset': False,          # The agent learns to press FIRE itself.
    'max_episode_steps': 27_000,      # Agent steps: 30 minutes of play.
}


def envpool_options(evaluation: bool) -> Dict[str, object]:
  """EnvPool options for an actor's games (life loss ends an episode,
  rewards clipped to their sign) or an evaluator's (whole games, real
  score)."""
  return {**PROTOCOL, 'episodic_life': not evaluation,
          'reward_clip': not evaluation}


def games() -> List[str]:
  """Every game EnvPool registers, as `atari:` names ('Pong', ...)."""
  from envpool import registration
  return sorted(task_id[:-len(_SUFFIX)]
                for task_id, (module, *_) in registration.registry.specs.items()
                if module == _MODULE and task_id.endswith(_SUFFIX))


def game_name(name: str) -> str:
  """'Pong' or 'Pong-v5' -> 'Pong'."""
  return name[:-len(_SUFFIX)] if name.endswith(_SUFFIX) else name


def envpool_id(name: str) -> str:
  """EnvPool's id of a game: 'Pong' -> 'Pong-v5' ('' if it has none)."""
  game = game_name(name)
  return game + _SUFFIX if game in games() else ''


def ale_games() -> List[str]:
  """Every game ale-py registers with Gymnasium ('Pong', ...): the NAME of
  each ALE/NAME-v5."""
  import gymnasium
  import ale_py  # noqa: F401  (registers ALE/*)
  return sorted(task_id[len(_ALE_PREFIX):-len(_SUFFIX)]
                for task_id in gymnasium.registry
                if task_id.startswith(_ALE_PREFIX) and task_id.endswith(_SUFFIX))


def ale_id(name: str) -> str:
  """ale-py's id of a game: 'Pong' -> 'ALE/Pong-v5' ('' if it has none).
  Case does not matter: EnvPool's 'TicTacToe3d' is ale-py's 'TicTacToe3D'."""
  game = game_name(name).lower()
  for known in ale_games():
    if known.lower() == game:
      return _ALE_PREFIX + known + _SUFFIX
  return ''


def unknown_game_message(env_name: str, backend: str = 'envpool') -> str:
  if backend == 'envpool':
    known, library, where = (games(), 'EnvPool',
                             'the NAME of each NAME-v5 in envpool.list_all_envs()')
  else:
    known, library, where = (ale_games(), 'ale-py',
                             'the NAME of each ALE/NAME-v5 in gymnasium.registry')
  examples = [g for g in ('Pong', 'Breakout', 'SpaceInvaders', 'Seaquest',
                          'MsPacman') if g in known]
  return (f'config.env_name {env_name!r}: unknown atari game; {library} has '
          f'{len(known)} games, e.g. {", ".join(f"atari:{g}" for g in examples)} '
          f'(all: {where})')


def check(name: str, env_name: str, backend: str) -> None:
  known = envpool_id if backend == 'envpool' else ale_id
  if not known(name):
    raise errors.LaunchError(unknown_game_message(env_name, backend))


def make(name: str, seed: int, max_episode_steps: int, evaluation: bool):
  """A game on the gym backend: Gymnasium + ale-py, imported only here."""
  from acme_launch.envs import atari_gymnasium
  return atari_gymnasium.make(ale_id(name), PROTOCOL, seed, max_episode_steps,
                              evaluation)


# EnvPool's own ALE on the envpool backend; on gym, Gymnasium's wrappers
# (which resize with OpenCV) over ale-py's.
ATARI = registry.register_family(registry.Family(
    FAMILY, registry.BACKENDS, (), check, make,
    backend_packages={'gym': ('gymnasium', 'ale_py', 'cv2')},
    envpool_id=envpool_id, envpool_options=envpool_options,
    example='atari:GAME'))
