"""The atari family: one protocol on two backends (EnvPool; Gymnasium +
ale-py), actors and evaluators differing only in life loss and reward
clipping. In process, no launch."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
import numpy as np
import pytest

from acme_launch import envs as environments
from acme_launch import errors
from acme_launch.envs import atari


def _pool(env_name: str, evaluation: bool):
  return environments.EnvPoolEnvironments(env_name, 1, seed=3,
                                          evaluation=evaluation)


@pytest.mark.parametrize('env_name', ['atari:Pong', 'atari:Breakout'])
def test_actor_and_evaluator_games_differ_in_life_loss_and_clipping_only(
    env_name):
  actor = _pool(env_name, evaluation=False).envpool_config
  evaluator = _pool(env_name, evaluation=True).envpool_config
  differing = {k for k in actor if actor[k] != evaluator[k]}
  assert differing == {'episodic_life', 'reward_clip'}
  assert actor['episodic_life'] and actor['reward_clip']
  assert not evaluator['episodic_life'] and not evaluator['reward_clip']
  # The protocol of envs/atari.py, as EnvPool was given it.
  for key, value in atari.PROTOCOL.items():
    assert actor[key] == value, key


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
@pytest.mark.parametrize('evaluation', [False, True])
def test_observations_are_uint8_frame_stacks(evaluation, backend):
  environment = environments.make_environment(
      'atari:Pong', 0, backend=backend, evaluation=evaluation)
  spec = specs.make_environment_spec(environment)
  assert spec.observations.dtype == np.uint8
  assert spec.observations.shape == (4, 84, 84)
  assert spec.actions.num_values == 6  # Pong's minimal action set.
  timestep = environment.reset()
  assert timestep.observation.dtype == np.uint8
  assert timestep.observation.shape == (4, 84, 84)


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
def test_actors_end_an_episode_at_a_lost_life_evaluators_at_game_over(
    backend):
  """Breakout with a fixed action sequence: the actor's episode ends with
  the first lost life (discount 0), the evaluator's game goes on."""
  lengths = {}
  for evaluation in (False, True):
    environment = environments.make_environment(
        'atari:Breakout', 5, backend=backend, evaluation=evaluation)
    environment.reset()
    actions = np.random.default_rng(0).integers(0, 4, 5000)
    for step, action in enumerate(actions, 1):  # noqa: B007  (read after the loop)
      timestep = environment.step(action)
      if timestep.last():
        assert timestep.discount == 0.0
        break
    lengths[evaluation] = step
  assert lengths[False] < lengths[True]


@pytest.mark.parametrize('env_name, backend, expected', [
    ('atari:NotAGame', 'envpool', 'unknown atari game; EnvPool has 104'),
    ('atari:NotAGame', 'gym', 'unknown atari game; ale-py has 104'),
])
def test_bad_atari_input_is_one_line(env_name, backend, expected):
  with pytest.raises(errors.LaunchError, match=expected) as raised:
    environments.check_task(env_name, backend)
  assert '\n' not in str(raised.value)
  assert 'atari:Pong' in str(raised.value)


def test_games_are_envpools_atari_ids():
  games = atari.games()
  assert {'Pong', 'Breakout', 'SpaceInvaders'} <= set(games)
  assert atari.envpool_id('Pong') == atari.envpool_id('Pong-v5') == 'Pong-v5'
  assert atari.envpool_id('NotAGame') == ''
  assert environments.check_task('atari:Breakout-v5', 'envpool').family == (
      'atari')


def test_both_backends_know_the_same_games():
  assert {g.lower() for g in atari.ale_games()} == {
      g.lower() for g in atari.games()}
  assert atari.ale_id('Pong') == atari.ale_id('Pong-v5') == 'ALE/Pong-v5'
  assert atari.ale_id('TicTacToe3d') == 'ALE/TicTacToe3D-v5'  # EnvPool's case.
  assert atari.ale_id('NotAGame') == ''
  assert environments.check_task('atari:Breakout', 'gym').family == 'atari'


def _play(environment, actions, ale=None):
  """Every timestep of a fixed action sequence, restarting ended episodes,
  and whether the game was over after each (where `ale` is given)."""
  timesteps, over = [environment.reset()], [False]
  for action in actions:
    timesteps.append(environment.reset() if timesteps[-1].last()
                     else environment.step(action))
    over.append(ale is not None and ale.game_over())
  return timesteps, over


def _ale(environment):
  """The emulator under a gym-backend game (through our dm_env adapters)."""
  while not hasattr(environment, 'unwrapped'):
    environment = environment._environment
  return environment.unwrapped.ale


@pytest.mark.parametrize('env_name, evaluation, limit', [
    ('atari:Breakout', False, 0),    # Lost lives, game over, clipped rewards.
    ('atari:Breakout', True, 150),   # Whole games cut at the limit.
    ('atari:Pong', True, 250),       # Real scores (-1, +1 a point).
])
def test_backends_give_the_same_frames_rewards_and_episode_ends(
    monkeypatch, env_name, evaluation, limit):
  """One no-op at each reset on both (the protocol draws 1 to 30 from each
  backend's own stream): then the two play the same game. A fixed random
  action sequence gives equal frames, rewards, discounts and episode ends
  at every step, so both have the same actions in the same order. One
  frame may differ: the newest of a game's very last observation
  (docs/environments.md#atari)."""
  monkeypatch.setitem(atari.PROTOCOL, 'noop_max', 1)
  made = {backend: environments.make_environment(
      env_name, 7, limit, backend=backend, evaluation=evaluation)
          for backend in ('envpool', 'gym')}
  spec = {b: specs.make_environment_spec(e) for b, e in made.items()}
  assert spec['gym'].observations == spec['envpool'].observations
  assert spec['gym'].actions == spec['envpool'].actions
  actions = np.random.default_rng(1).integers(
      0, spec['gym'].actions.num_values, 600)
  envpool_steps, _ = _play(made['envpool'], actions)
  gym_steps, game_over = _play(made['gym'], actions, _ale(made['gym']))
  ends = 0
  for envpool_step, gym_step, over in zip(envpool_steps, gym_steps,
                                          game_over):
    assert gym_step.step_type == envpool_step.step_type
    if not gym_step.first():
      assert gym_step.reward == envpool_step.reward
      assert gym_step.discount == envpool_step.discount
      assert gym_step.reward.dtype == envpool_step.reward.dtype == np.float32
    assert gym_step.observation.dtype == np.uint8
    frames = 3 if over and gym_step.last() else 4
    np.testing.assert_array_equal(gym_step.observation[:frames],
                                  envpool_step.observation[:frames])
    ends += gym_step.last()
  assert ends >= 2  # Episodes ended, and the next ones matched too.
  assert any(t.reward for t in gym_steps if not t.first())


@pytest.mark.parametrize('backend', ['envpool', 'gym'])
def test_no_op_starts_differ_by_seed(backend):
  """The protocol's 1-30 no-ops: different seeds start Pong at different
  frames, so 20 steps later the screens differ."""
  screens = set()
  for seed in range(6):
    environment = environments.make_environment('atari:Pong', seed,
                                                backend=backend)
    environment.reset()
    for _ in range(20):
      timestep = environment.step(0)
    screens.add(timestep.observation.tobytes())
  assert len(screens) >= 4
