"""A user's own agent and environment, from outside the package.

The agent module and the environment module are written into one temporary
folder (on PYTHONPATH, as a user's project would be), the config that names
them into another, and the real launcher runs them: Launchpad, Reverb, Acme's
DQN learner. The adapter defines only the three required functions (the
module shorthand); `tiny_dqn_value` declares the same agent as an
`ADAPTER` value.
"""

import os

import pytest

from tests.conftest import REPO_ROOT, read_json, run_launcher

AGENT = '''
"""A minimal adapter: the three functions, nothing declared."""
from acme.agents.jax import dqn
from acme.jax import networks as networks_lib
from acme.jax import utils
import haiku as hk
import rlax


def make_builder(config, learner_logger_fn, environment_spec):
  section = config.tiny_dqn
  dqn_config = dqn.DQNConfig(
      learning_rate=1e-3, batch_size=16, min_replay_size=50,
      max_replay_size=10_000, samples_per_insert=section.samples_per_insert,
      epsilon=0.2)
  loss_fn = dqn.PrioritizedDoubleQLearning(
      discount=0.99, importance_sampling_exponent=0.2)
  return dqn.DQNBuilder(dqn_config, loss_fn, logger_fn=learner_logger_fn)


def make_networks(config, environment_spec):
  num_actions = environment_spec.actions.num_values
  transformed = hk.without_apply_rng(hk.transform(
      lambda x: hk.nets.MLP([8, num_actions])(x)))
  dummy = utils.add_batch_dim(utils.zeros_like(environment_spec.observations))
  return networks_lib.FeedForwardNetwork(
      lambda key: transformed.init(key, dummy), transformed.apply)


def make_policy(config, networks, environment_spec, evaluation):
  epsilon = 0.0 if evaluation else 0.2

  def policy(params, key, observation, *unused):
    unbatched = observation.ndim == 1
    if unbatched:
      observation = utils.add_batch_dim(observation)
    actions = rlax.epsilon_greedy(epsilon).sample(
        key, networks.apply(params, observation))
    return utils.squeeze_batch_dim(actions) if unbatched else actions

  return policy
'''

AGENT_VALUE = '''
"""The same agent as one value, its settings in config.tiny_dqn."""
from acme_launch.agents import Adapter
from user_project import tiny_dqn

ADAPTER = Adapter(make_builder=tiny_dqn.make_builder,
                  make_networks=tiny_dqn.make_networks,
                  make_policy=tiny_dqn.make_policy, section='tiny_dqn')
'''

GYMNASIUM_ENVIRONMENT = '''
"""A Gymnasium task of the user's: press 1 as often as you can."""
import gymnasium
import numpy as np


class Press(gymnasium.Env):
  observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
  action_space = gymnasium.spaces.Discrete(3)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return self._observation(), {}

  def step(self, action):
    self._t += 1
    return self._observation(), float(action == 1), self._t >= 20, False, {}

  def _observation(self):
    return self.np_random.uniform(-1, 1, 2).astype(np.float32)


gymnasium.register('PressTask-v0', entry_point='user_project.press_env:Press')
'''

ENVIRONMENT = '''
"""Walk right: reach the end of a short line (reward 1), or time out."""
import dm_env
from dm_env import specs
import numpy as np


class Line(dm_env.Environment):

  def __init__(self, seed, length):
    self._rng, self._length, self._at = np.random.default_rng(seed), length, 0

  def reset(self):
    self._at = int(self._rng.integers(self._length // 2))
    return dm_env.restart(self._observation())

  def step(self, action):
    self._at = max(0, self._at + (1 if int(action) == 1 else -1))
    if self._at >= self._length:
      return dm_env.termination(1.0, self._observation())
    return dm_env.transition(0.0, self._observation())

  def _observation(self):
    return np.array([self._at / self._length], np.float32)

  def observation_spec(self):
    return specs.Array((1,), np.float32, 'observation')

  def action_spec(self):
    return specs.DiscreteArray(2, name='action')


def make_env(seed, config):
  return Line(seed, config.line_length)


def not_an_env(seed):
  return 'an environment'


def broken(seed):
  raise RuntimeError('the simulator licence expired')
'''

FAMILY = '''
"""The line family: line_env's Line, one task per length."""
from acme_launch import envs, errors
from user_project import line_env

LENGTHS = {'short': 4, 'long': 8}


def check(name, env_name, backend):
  if name not in LENGTHS:
    raise errors.LaunchError(f'config.env_name {env_name!r}: no such line')


envs.register_family(envs.Family(
    'line', backends=('gym',), packages=(), check=check,
    make=lambda name, seed: line_env.Line(seed, LENGTHS[name])))
'''

CONFIG = '''
from acme_launch.config import base_config
import ml_collections


def get_config():
  config = base_config(agent='{agent}', env_name='{env}',
                       max_actor_steps=600, num_actors=1,
                       eval_every_steps=300)
  config.env_max_episode_steps = 30
  config.line_length = 4
  config.env_modules = ('user_project.line_family',)  # Registers `line`.
  config.final_eval_episodes = 3
  config.checkpoint.interval_minutes = 0.02
  config.tiny_dqn = ml_collections.ConfigDict()
  config.tiny_dqn.samples_per_insert = 2.0
  return config
'''


@pytest.fixture(scope='module')
def project(tmp_path_factory):
  """(PYTHONPATH folder, config path): the user's package and, elsewhere,
  a config naming its agent and environment. One for the module: tests only
  read it, and the in-process tests import `user_project` from it once."""
  tmp_path = tmp_path_factory.mktemp('project')
  root = tmp_path / 'user_code'
  (root / 'user_project').mkdir(parents=True)
  (root / 'user_project' / '__init__.py').write_text('')
  (root / 'user_project' / 'tiny_dqn.py').write_text(AGENT)
  (root / 'user_project' / 'tiny_dqn_value.py').write_text(AGENT_VALUE)
  (root / 'user_project' / 'not_an_adapter.py').write_text(
      AGENT + 'ADAPTER = make_policy\n')
  (root / 'user_project' / 'line_env.py').write_text(ENVIRONMENT)
  (root / 'user_project' / 'press_env.py').write_text(GYMNASIUM_ENVIRONMENT)
  (root / 'user_project' / 'line_family.py').write_text(FAMILY)
  (root / 'user_project' / 'no_policy.py').write_text(
      AGENT.replace('def make_policy', 'def make_policy_later'))
  (root / 'user_project' / 'recurrent_no_core.py').write_text(
      AGENT + 'RECURRENT = True\n')
  (root / 'user_project' / 'does_not_import.py').write_text(
      'import no_such_package_here\n')
  configs = tmp_path / 'configs'
  configs.mkdir()
  config = configs / 'line_dqn.py'
  config.write_text(CONFIG.format(agent='user_project.tiny_dqn',
                                  env='user_project.line_env:make_env'))
  return str(root), str(config)


def _launch(project, *args, **kwargs):
  root, config = project
  return run_launcher(f'--config={config}', *args,
                      env={'PYTHONPATH': root}, **kwargs)


def test_own_agent_and_environment_reach_the_budget_with_a_final_evaluation_and_resume(
    project, workdir):
  # The task of a family registered by a module of the user's
  # (config.env_modules), in the launcher and in every node process.
  result = _launch(project, f'--workdir={workdir}', '--run_name=own',
                   '--config.env_name=line:short', timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = os.path.join(workdir, 'own')
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['final_eval_episodes'] == 3
  saved = read_json(os.path.join(run_dir, 'config.json'))
  assert saved['config']['agent'] == 'user_project.tiny_dqn'
  assert saved['config']['env_name'] == 'line:short'
  assert saved['identity']['observation_shapes'] == [[1]]
  assert os.listdir(os.path.join(run_dir, 'checkpoints', 'learner'))

  resumed = _launch(project, f'--resume={run_dir}',
                    '--config.env_name=line:short',
                    '--config.max_actor_steps=900', timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'resuming from' in resumed.stdout
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= 900


def test_dry_run_and_sweep_with_an_own_agent_show_its_specs_and_points(
    project, workdir):
  # The plan's text (what --dry_run prints) in this process; the launcher's
  # own --dry_run runs for the example and the sweep below.
  import acme_launch
  from acme_launch.config import registry
  root, config_path = project
  text = acme_launch.dry_run(registry.load(config_path),
                             python_path=[root]).text
  assert 'user_project.tiny_dqn on user_project.line_env:make_env' in text
  assert 'observations: float32 (1,)' in text
  assert 'actions: int32 (), 2 values' in text
  # Modules beside the config file need no PYTHONPATH.
  example = run_launcher('--config=examples/dueling_dqn_corridor.py',
                         '--dry_run', env={'PYTHONPATH': ''})
  assert example.returncode == 0, example.stderr[-3000:]
  assert 'observations: float32 (4,) in [0, 1]' in example.stdout
  sweep = _launch(project, '--sweep=seed=0,1', f'--workdir={workdir}',
                  '--dry_run')
  assert sweep.returncode == 0, sweep.stderr[-3000:]
  assert 'seed=0' in sweep.stdout and 'seed=1' in sweep.stdout
  assert os.listdir(workdir) == []


# override -> the error line's text.
BAD_OWN_MODULES = {
    'agent=user_project.no_policy':
        'module user_project.no_policy defines no make_policy',
    'agent=user_project.not_an_adapter':
        'user_project.not_an_adapter.ADAPTER is a function, not an '
        'acme_launch.agents.Adapter',
    'agent=user_project.does_not_import':
        'importing user_project.does_not_import failed: ModuleNotFoundError',
    'agent=user_project.no_such_module':
        "no module 'user_project.no_such_module' on the path",
    'env_name=user_project.line_env:not_an_env':
        'the factory returned a builtins.str, not a dm_env.Environment',
    'env_name=user_project.line_env:broken':
        'the factory raised RuntimeError: the simulator licence expired',
    'env_name=user_project.line_env:no_such_factory':
        'user_project.line_env:no_such_factory',
    'env_name=line:wide': "config.env_name 'line:wide': no such line",
    'env_name=line:short,env_backend=envpool':
        'config.env_backend envpool does not run line tasks',
    'agent=user_project.recurrent_no_core,envs_per_actor=2':
        'keeps recurrent state and has no make_actor_core, so its actors step '
        'one environment each: set config.envs_per_actor=1 (got 2)',
    'agent=user_project.recurrent_no_core,inference=central':
        "config.inference='central' cannot serve config.agent "
        'user_project.recurrent_no_core: it keeps recurrent state and has no '
        'make_actor_core',
}


# Through the launcher: an agent module that raises on import and an
# environment factory that raises, each one line (no traceback), exit 2,
# nothing started. Every case, these two included, is also decided in
# process below: the launcher prints that LaunchError's line.
@pytest.mark.parametrize('override', [
    'agent=user_project.does_not_import', 'env_name=user_project.line_env:broken'])
def test_a_bad_own_module_is_one_line_exit_2_and_starts_nothing(
    project, workdir, override):
  flags = [f'--config.{o}' for o in override.split(',')]
  result = _launch(project, *flags, f'--workdir={workdir}')
  assert result.returncode == 2, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr
  errors = [l for l in result.stderr.splitlines() if 'acme-launch: error:' in l]
  assert len(errors) == 1, result.stderr
  assert BAD_OWN_MODULES[override] in errors[0], errors[0]
  assert os.listdir(workdir) == []


@pytest.mark.parametrize('override', sorted(BAD_OWN_MODULES))
def test_a_bad_own_module_is_a_one_line_launch_error_before_anything_starts(
    project, workdir, override):
  """The launcher's decision in this process (the Python API's dry_run,
  the CLI's own steps): the LaunchError whose one line the CLI prints with
  exit 2, before a run directory is made."""
  import acme_launch
  from acme_launch import errors
  from acme_launch.config import registry
  root, config_path = project
  config = registry.load(config_path)
  for setting in override.split(','):
    name, value = setting.split('=', 1)
    config[name] = int(value) if value.isdigit() else value
  with pytest.raises(errors.LaunchError) as raised:
    acme_launch.dry_run(config, workdir=workdir, python_path=[root])
  message = str(raised.value)
  assert '\n' not in message and BAD_OWN_MODULES[override] in message, message
  assert os.listdir(workdir) == []


EXAMPLES = os.path.join(REPO_ROOT, 'examples')


def test_the_example_runs_through_the_python_api_and_resumes(tmp_path):
  import acme_launch
  from acme_launch import errors
  from acme_launch.config import registry
  config = registry.load(os.path.join(EXAMPLES, 'dueling_dqn_corridor.py'))
  config.max_actor_steps = 600
  config.num_actors = 1
  config.eval_every_steps = 300
  config.eval_episodes = 2
  config.final_eval_episodes = 4
  config.dueling_dqn.min_replay_size = 50
  config.dueling_dqn.samples_per_insert = 2.0
  config.checkpoint.interval_minutes = 0.02
  workdir = str(tmp_path / 'runs')
  plan = acme_launch.dry_run(config, workdir=workdir,
                             python_path=[EXAMPLES])
  assert plan.nodes['actor'] == ('actor/0',)
  assert plan.environment_spec.actions.num_values == 2
  assert 'observations: float32 (4,) in [0, 1]' in plan.text
  assert plan.replay is None  # Its adapter declares no replay tables.
  assert not os.path.exists(workdir)

  summary = acme_launch.launch(config, config_name='corridor', workdir=workdir,
                            run_name='api', python_path=[EXAMPLES],
                            progress_every=30)
  assert summary['exit_code'] == 0
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['final_eval_episodes'] == 4
  run_dir = summary['run_dir']
  assert os.listdir(os.path.join(run_dir, 'checkpoints', 'learner'))

  config.max_actor_steps = 900
  resumed = acme_launch.launch(config, resume=run_dir, python_path=[EXAMPLES],
                            progress_every=30)
  assert resumed['exit_reason'] == 'budget_reached'
  assert resumed['restored_actor_steps'] >= 600
  assert resumed['actor_steps'] >= 900

  # Bad input raises the CLI's one error type, with its line.
  config.num_actors = 0
  with pytest.raises(errors.LaunchError, match='config.num_actors must be'):
    acme_launch.launch(config, workdir=workdir, run_name='bad')
  with pytest.raises(errors.LaunchError, match="unknown option 'workers'"):
    acme_launch.launch(config, workers=3)
  assert sorted(os.listdir(workdir)) == ['api']


def test_own_modules_through_the_python_api_with_a_gymnasium_class(
    project, workdir):
  # The same out-of-tree agent, declared as an ADAPTER value, on a Gymnasium
  # class of the user's, launched from Python; the registered id of the same
  # module plans too.
  import acme_launch
  from acme_launch.config import registry
  root, config_path = project
  config = registry.load(config_path)
  config.agent = 'user_project.tiny_dqn_value'
  config.env_name = 'gymnasium:user_project.press_env:Press'
  plan = acme_launch.dry_run(config, python_path=[root])
  assert plan.environment_spec.actions.num_values == 3
  config.env_name = 'gymnasium:user_project.press_env:PressTask-v0'
  assert 'observations: float32 (2,) in [-1, 1]' in acme_launch.dry_run(
      config, python_path=[root]).text
  config.env_name = 'gymnasium:user_project.press_env:Press'
  summary = acme_launch.launch(config, config_name='press', workdir=workdir,
                               run_name='press', python_path=[root],
                               progress_every=30)
  assert summary['exit_code'] == 0, summary
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['final_eval_episodes'] == 3
