"""The atari family: EnvPool's games under one protocol, actors and
evaluators differing only in life loss and reward clipping. In process, no
launch."""

from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
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


@pytest.mark.parametrize('evaluation', [False, True])
def test_observations_are_uint8_frame_stacks(evaluation):
  environment = environments.make_environment(
      'atari:Pong', 0, backend='envpool', evaluation=evaluation)
  spec = specs.make_environment_spec(environment)
  assert spec.observations.dtype == np.uint8
  assert spec.observations.shape == (4, 84, 84)
  assert spec.actions.num_values == 6  # Pong's minimal action set.
  timestep = environment.reset()
  assert timestep.observation.dtype == np.uint8
  assert timestep.observation.shape == (4, 84, 84)


def test_actors_end_an_episode_at_a_lost_life_evaluators_at_game_over():
  """Breakout with a fixed action sequence: the actor's episode ends with
  the first lost life (discount 0), the evaluator's game goes on."""
  lengths = {}
  for evaluation in (False, True):
    environment = environments.make_environment(
        'atari:Breakout', 5, backend='envpool', evaluation=evaluation)
    environment.reset()
    actions = np.random.default_rng(0).integers(0, 4, 5000)
    for step, action in enumerate(actions, 1):
      timestep = environment.step(action)
      if timestep.last():
        assert timestep.discount == 0.0
        break
    lengths[evaluation] = step
  assert lengths[False] < lengths[True]


@pytest.mark.parametrize('env_name, backend, expected', [
    ('atari:NotAGame', 'envpool', 'unknown atari game; EnvPool has'),
    ('atari:Pong', 'gym', 'use config.env_backend=envpool'),
])
def test_bad_atari_input_is_one_line(env_name, backend, expected):
  with pytest.raises(errors.LaunchError, match=expected) as raised:
    environments.check_task(env_name, backend)
  assert '\n' not in str(raised.value)
  assert 'atari:Pong' in str(raised.value) or backend == 'gym'


def test_games_are_envpools_atari_ids():
  games = atari.games()
  assert {'Pong', 'Breakout', 'SpaceInvaders'} <= set(games)
  assert atari.envpool_id('Pong') == atari.envpool_id('Pong-v5') == 'Pong-v5'
  assert atari.envpool_id('NotAGame') == ''
  assert environments.check_task('atari:Breakout-v5', 'envpool').family == (
      'atari')
