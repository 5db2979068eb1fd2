"""The family registry: a family of the user's, registered from a module
outside the package that config.env_modules names, is checked before launch
and made where a node makes its environments; bad input stays one line."""

import textwrap

import dm_env
import ml_collections
import numpy as np
import pytest

from acme_launch import envs as environments
from acme_launch import errors

# A user's module: a real dm_env task and the family that names it.
WALKS = '''
"""The {family} family: walk right to the end of a line."""
import dm_env
from dm_env import specs
import numpy as np

from acme_launch import envs, errors

LENGTHS = {{'short': 3, 'long': 8}}


class Walk(dm_env.Environment):

  def __init__(self, length, seed):
    self._rng, self._length, self._at = np.random.default_rng(seed), length, 0

  def reset(self):
    self._at = 0
    return dm_env.restart(self._observation())

  def step(self, action):
    self._at += 1 if int(action) == 1 else 0
    if self._at >= self._length:
      return dm_env.termination(1.0, self._observation())
    return dm_env.transition(0.0, self._observation())

  def _observation(self):
    return np.array([self._at / self._length, self._rng.uniform()])

  def observation_spec(self):
    return specs.Array((2,), np.float64, 'observation')

  def action_spec(self):
    return specs.DiscreteArray(2, name='action')


def check(name, env_name, backend):
  if name not in LENGTHS:
    raise errors.LaunchError(
        f'config.env_name {{env_name!r}}: unknown {family} task; known: '
        + ', '.join(f'{family}:' + n for n in LENGTHS))


def make(name, seed):
  return Walk(LENGTHS[name], seed)


envs.register_family(envs.Family(
    '{family}', backends=('gym',), packages=('numpy',), check=check,
    make=make, example='{family}:LENGTH'))
'''

OURS = ("name a task as TASK (gym), gymnasium:TASK, dmc:DOMAIN-TASK, "
        "atari:GAME, minatar:GAME")


def _config(module: str, env_name: str) -> ml_collections.ConfigDict:
  from acme_launch.config import base_config
  config = base_config(agent='dqn', env_name=env_name, max_actor_steps=100,
                       num_actors=1, eval_every_steps=50)
  config.env_modules = (module,)
  return config


@pytest.fixture
def user_module(tmp_path, monkeypatch):
  """(module name, family name): a module outside the package, on the path
  as a user's project is, not yet imported."""
  def write(module, family):
    (tmp_path / f'{module}.py').write_text(
        textwrap.dedent(WALKS.format(family=family)))
    return module
  monkeypatch.syspath_prepend(str(tmp_path))
  return write


def test_a_family_of_the_users_is_made_in_a_node_and_checked_before_launch(
    user_module):
  module = user_module('user_walks', 'walk')
  config = _config(module, 'walk:short')
  # A node: nothing registered `walk` in this process yet; the config names
  # the module, and making the first environment imports it.
  assert 'walk' not in [f.name for f in environments.all_families()]
  environment = environments.make_environment('walk:short', seed=3,
                                              max_episode_steps=2,
                                              config=config)
  assert environments.family('walk').make.__module__ == module
  # Acme's wrappers, as for a shipped family: float32, and the config's
  # step limit (its make takes none) ending the episode with discount 1.
  assert environment.observation_spec().dtype == np.float32
  first = environment.reset()
  assert first.observation.dtype == np.float32
  assert not environment.step(0).last()
  limit = environment.step(0)
  assert limit.last() and limit.discount == 1.0
  batch = environments.make_environments('walk:long', [1, 2], config=config)
  assert batch.num_envs == 2
  assert batch.reset().observation.shape == (2, 2)

  # The launcher: schema.validate checks the task before anything starts.
  from acme_launch.config import schema
  schema.validate(config)
  assert environments.check_task('walk:long', 'gym', (module,)) == (
      environments.Task('walk', 'long'))
  for env_name, backend, line in [
      ('walk:far', 'gym',
       "config.env_name 'walk:far': unknown walk task; known: walk:short, "
       'walk:long'),
      ('walk:short', 'envpool',
       'config.env_backend envpool does not run walk tasks: use '
       'config.env_backend=gym'),
      ('hike:short', 'gym', f'{OURS}, pomdp:TASK or walk:LENGTH')]:
    with pytest.raises(errors.LaunchError) as raised:
      environments.check_task(env_name, backend, (module,))
    assert line in str(raised.value) and '\n' not in str(raised.value)


def test_an_unknown_family_is_the_one_line_it_was():
  with pytest.raises(errors.LaunchError) as raised:
    environments.check_task('nes:Mario', 'gym')
  # Families registered by other tests follow ours.
  assert str(raised.value).startswith(
      f"config.env_name 'nes:Mario': unknown task family 'nes'; {OURS}")
  assert '\n' not in str(raised.value)


def test_a_module_that_does_not_import_or_a_missing_package_is_one_line(
    user_module, tmp_path):
  with pytest.raises(errors.LaunchError, match=(
      'config.env_modules: importing no_such_walks failed: '
      "ModuleNotFoundError: No module named 'no_such_walks'")):
    environments.check_task('walk:short', 'gym', ('no_such_walks',))
  module = user_module('user_trails', 'trail')
  (tmp_path / f'{module}.py').write_text(
      (tmp_path / f'{module}.py').read_text().replace(
          "packages=('numpy',)", "packages=('no_such_simulator',)"))
  with pytest.raises(errors.LaunchError, match=(
      "no_such_simulator cannot be imported .*; it runs 'trail:short' on "
      'the gym backend')):
    environments.check_task('trail:short', 'gym', (module,))


def test_a_family_is_a_frozen_value_and_ours_stay_ours():
  gym = environments.family('gym')
  with pytest.raises(AttributeError):
    gym.name = 'mine'
  for family, line in [
      (environments.Family('gym', ('gym',), (), gym.check, gym.make),
       "environment family 'gym' is one of ours"),
      (environments.Family('mine', ('gpu',), (), gym.check, gym.make),
       r"backends \('gpu',\); choose from: gym, envpool"),
      (environments.Family('mine', ('envpool',), (), gym.check, gym.make),
       'give it an envpool_id')]:
    with pytest.raises(errors.LaunchError, match=line):
      environments.register_family(family)
  assert isinstance(environments.make_environment('dmc:walker-walk', 0),
                    dm_env.Environment)
