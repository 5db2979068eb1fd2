"""The minatar family: MinAtar's games as dm_env under its own protocol,
seeded by the launcher, and bad names refused. In process, no launch."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import dm_env
import numpy as np
import pytest

from acme_launch import envs as environments
from acme_launch import errors
from acme_launch.agents import images
from acme_launch.envs import minatar

# (channels, minimal action set size) of each game, as MinAtar 1.0.15 has them.
GAMES = {'asterix': (4, 5), 'breakout': (4, 3), 'freeway': (7, 3),
         'seaquest': (10, 6), 'space_invaders': (6, 4)}


def _play(environment, actions):
  """Steps through `actions`, restarting after each episode; returns the
  observations and each episode's (length, return, last discount)."""
  observations = [environment.reset().observation]
  episodes, length, total = [], 0, 0.0
  for action in actions:
    timestep = environment.step(action)
    observations.append(timestep.observation)
    length += 1
    total += float(timestep.reward)
    if timestep.last():
      episodes.append((length, total, float(timestep.discount)))
      length, total = 0, 0.0
      observations.append(environment.reset().observation)
  return np.stack(observations), episodes


def test_the_family_lists_minatars_five_games():
  assert minatar.games() == sorted(GAMES)


@pytest.mark.parametrize('game', sorted(GAMES))
def test_specs_are_uint8_grids_and_the_minimal_action_set(game):
  channels, num_actions = GAMES[game]
  environment = environments.make_environment(f'minatar:{game}', 0)
  spec = specs.make_environment_spec(environment)
  assert spec.observations.shape == (10, 10, channels)
  assert spec.observations.dtype == np.uint8
  assert float(np.max(spec.observations.maximum)) == 1.0
  assert spec.actions.num_values == num_actions
  assert spec.rewards.dtype == np.float32
  assert spec.discounts.dtype == np.float32
  timestep = environment.reset()
  assert timestep.first()
  assert timestep.observation.dtype == np.uint8
  assert timestep.observation.shape == (10, 10, channels)
  assert set(np.unique(timestep.observation)) <= {0, 1}
  assert timestep.observation.any()  # The player, at least, is on the grid.
  for action in range(num_actions):  # Every action of the set is accepted.
    timestep = environment.step(action)
    assert timestep.observation.dtype == np.uint8
    assert timestep.reward.dtype == np.float32
    assert timestep.discount.dtype == np.float32
  # The networks read it as a channels-last image scaled by 1, not 1/255.
  layout = images.images({'channels_last': True}, spec.observations)
  assert layout == images.Images(channels_last=True, scale=1.0)


def test_a_lost_game_ends_with_discount_0_and_the_next_step_restarts():
  """Breakout with the paddle kept still loses its one ball."""
  environment = environments.make_environment('minatar:breakout', 1)
  _, episodes = _play(environment, [0] * 300)
  assert episodes, 'a still paddle never lost the ball'
  assert all(discount == 0.0 for _, _, discount in episodes)
  # dm_env: a step after the last one starts a new episode.
  environment.reset()
  while not environment.step(0).last():
    pass
  assert environment.step(0).first()


def test_freeway_ends_itself_when_its_clock_runs_out():
  """Its timer of 2,500 runs out on step 2,501: the game is over."""
  environment = environments.make_environment('minatar:freeway', 2)
  _, episodes = _play(environment, [1] * 2501)  # Always up: it scores.
  assert [(length, discount) for length, _, discount in episodes] == [
      (2501, 0.0)]
  assert episodes[0][1] > 0


def test_the_step_limit_cuts_an_episode_with_discount_1():
  # Asterix: stay still; the limit (config.env_max_episode_steps) comes first.
  environment = environments.make_environment('minatar:asterix', 3,
                                              max_episode_steps=5)
  _, episodes = _play(environment, [0] * 5)
  assert [(length, discount) for length, _, discount in episodes] == [(5, 1.0)]
  # Without one, MinAtar's own limit applies.
  assert minatar.MinAtarEnvironment('asterix', 0)._limit == (
      minatar.MAX_EPISODE_STEPS)


@pytest.mark.parametrize('game', ['breakout', 'space_invaders', 'seaquest'])
def test_the_same_seed_plays_the_same_game_and_another_seed_does_not(game):
  """Random actions through sticky actions and the game's own randomness:
  the launcher's seed decides both."""
  actions = np.random.default_rng(0).integers(0, GAMES[game][1], 400)
  runs = [_play(environments.make_environment(f'minatar:{game}', seed),
                actions) for seed in (11, 11, 12)]
  assert np.array_equal(runs[0][0], runs[1][0])
  assert runs[0][1] == runs[1][1]
  assert not (runs[0][0].shape == runs[2][0].shape and
              np.array_equal(runs[0][0], runs[2][0]))


def test_sticky_actions_repeat_the_previous_action_one_step_in_ten():
  """MinAtar's protocol: with probability 0.1 the game takes the previous
  action. Breakout's paddle (channel 0, bottom row) moves left or right:
  count how often it did not move as told."""
  environment = minatar.MinAtarEnvironment('breakout', 5)
  assert environment._game.sticky_action_prob == 0.1
  environment.reset()
  rng = np.random.default_rng(1)
  ignored = told = 0
  previous = None
  for _ in range(3000):
    position = int(np.flatnonzero(environment._game.state()[9, :, 0])[0])
    action = int(rng.integers(1, 3))  # 1: left, 2: right (minimal set).
    timestep = environment.step(action)
    if timestep.last():
      environment.reset()
      previous = None
      continue
    after = int(np.flatnonzero(environment._game.state()[9, :, 0])[0])
    if previous is not None and previous != action and 0 < position < 9:
      told += 1
      ignored += (after - position) != (-1 if action == 1 else 1)
    previous = action
  assert told > 500
  assert 0.05 < ignored / told < 0.15


def test_python_backend_steps_several_games_as_one_batch():
  envs = environments.make_environments('minatar:breakout', [0, 1, 2])
  timesteps = envs.reset()
  assert timesteps.observation.shape == (3, 10, 10, 4)
  assert timesteps.observation.dtype == np.uint8
  timesteps = envs.step(np.array([0, 1, 2]))
  assert timesteps.step_type.tolist() == [int(dm_env.StepType.MID)] * 3


@pytest.mark.parametrize('env_name, backend, expected', [
    ('minatar:pong', 'gym', "'minatar:pong': unknown minatar game; choose "
     'one of: minatar:asterix, minatar:breakout, minatar:freeway, '
     'minatar:seaquest, minatar:space_invaders'),
    ('minatar:breakout', 'envpool', 'use config.env_backend=gym'),
    ('minatar:', 'gym', 'unknown task family'),
])
def test_bad_minatar_input_is_one_line(env_name, backend, expected):
  with pytest.raises(errors.LaunchError) as raised:
    environments.check_task(env_name, backend)
  assert expected in str(raised.value)
  assert '\n' not in str(raised.value)


def test_a_known_game_passes_the_check():
  task = environments.check_task('minatar:space_invaders', 'gym')
  assert task == environments.Task('minatar', 'space_invaders')
