"""Tasks: `config.env_name` parsed into a family's task, and checked against
what the family's library (and EnvPool) registers."""

import dataclasses
import importlib
import importlib.util
from typing import List

from acme_launch import errors
from acme_launch.envs import atari
from acme_launch.envs import minatar
from acme_launch.envs import pomdp
from acme_launch.envs import user
from acme_launch.envs.families import dmc_domain_task, dmc_suite

FAMILIES = ('gym', 'gymnasium', 'dmc', atari.FAMILY, minatar.FAMILY,
            pomdp.FAMILY)
USER = 'user'  # MODULE:FACTORY, the user's own (envs/user.py).
BACKENDS = ('gym', 'envpool')
# The Python package each backend needs beyond the gym family's own.
_BACKEND_PACKAGES = {'envpool': 'envpool'}
_FAMILY_PACKAGES = {'gym': ('gym',), 'gymnasium': ('gymnasium',),
                    'dmc': ('dm_control',), minatar.FAMILY: ('minatar',),
                    pomdp.FAMILY: ('gymnasium',)}
# Atari's packages depend on the backend: EnvPool's own ALE, or Gymnasium's
# wrappers (which resize with OpenCV) over ale-py's.
_ATARI_PACKAGES = {'envpool': ('envpool',),
                   'gym': ('gymnasium', 'ale_py', 'cv2')}


@dataclasses.dataclass(frozen=True)
class Task:
  family: str  # One of FAMILIES.
  name: str    # The family's own id: 'HalfCheetah-v5', 'walker-walk'.


def parse_task(env_name: str) -> Task:
  """'gymnasium:HalfCheetah-v5' -> Task('gymnasium', 'HalfCheetah-v5')."""
  family, sep, name = env_name.partition(':')
  if not sep:
    return Task('gym', env_name)
  if family not in FAMILIES and _is_module(family):
    if name.isidentifier() and (_has_attr(family, name) or
                                not _gym_registered(name)):
      return Task(USER, env_name)  # A factory of the user's (envs/user.py).
    return Task('gym', env_name)  # gym's own MODULE:ID form.
  if family not in FAMILIES or not name:
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: unknown task family {family!r}; '
        f'name a task as TASK (gym), gymnasium:TASK, dmc:DOMAIN-TASK, '
        'atari:GAME, minatar:GAME or pomdp:TASK')
  return Task(family, name)


def _has_attr(module: str, name: str) -> bool:
  try:
    return hasattr(importlib.import_module(module), name)
  except Exception:
    return False  # check_task reports the import error.


def _gym_registered(name: str) -> bool:
  import gym
  return name in gym.envs.registry


def _is_module(name: str) -> bool:
  try:
    return importlib.util.find_spec(name) is not None
  except (ImportError, ValueError):
    return False


def _family_tasks(family: str) -> List[str]:
  """Every task name a family's library registers, for error messages."""
  if family == 'gym':
    import gym
    return sorted(gym.envs.registry.keys())
  if family == 'gymnasium':
    import gymnasium
    return sorted(gymnasium.registry.keys())
  return [f'{d}-{t.replace("_", "-")}' for d, t in dmc_suite().ALL_TASKS]


def _envpool_tasks() -> List[str]:
  import envpool
  return envpool.list_all_envs()


def task_envpool_id(task: Task) -> str:
  """EnvPool's name for a task ('' where it has none): gym ids as they are,
  dm_control's `walker-walk` as `WalkerWalk-v1`."""
  if task.family == 'gym':
    name = task.name
  elif task.family == atari.FAMILY:
    return atari.envpool_id(task.name)
  elif task.family == 'dmc':
    domain, task_name = dmc_domain_task(task.name)
    name = ''.join(part[:1].upper() + part[1:]
                   for part in f'{domain}_{task_name}'.split('_')) + '-v1'
  else:
    return ''
  return name if name in _envpool_tasks() else ''


def check_task(env_name: str, backend: str) -> Task:
  """The task, or LaunchError (one line naming the choices) before launch."""
  if backend not in BACKENDS:
    raise errors.LaunchError(
        f'config.env_backend {backend!r} is unknown; choose one of: '
        f'{", ".join(BACKENDS)}')
  task = parse_task(env_name)
  if task.family == USER:
    if backend == 'envpool':
      raise errors.LaunchError(
          f'config.env_backend envpool runs EnvPool\'s own tasks, not '
          f'{env_name!r}: use config.env_backend=gym for a factory of yours')
    user.factory(env_name)
    return task
  if task.family == minatar.FAMILY and backend != 'gym':
    raise errors.LaunchError(
        f'config.env_backend {backend} does not run minatar games (EnvPool '
        'has none): use config.env_backend=gym')
  if task.family == pomdp.FAMILY and backend != 'gym':
    raise errors.LaunchError(
        f'config.env_backend {backend} does not run pomdp tasks (they hide '
        'part of a Gymnasium task\'s observation): use config.env_backend=gym')
  packages = (_ATARI_PACKAGES[backend] if task.family == atari.FAMILY else
              _FAMILY_PACKAGES[task.family] + (
                  (_BACKEND_PACKAGES[backend],)
                  if backend in _BACKEND_PACKAGES else ()))
  for package in packages:
    try:
      importlib.import_module(package)
    except ImportError as e:  # Missing, or a library it links is missing.
      raise errors.LaunchError(
          f'{package} cannot be imported ({" ".join(str(e).split())[:200]}); '
          f'it runs {env_name!r} on the {backend} backend: run '
          'scripts/setup.sh, which installs the lock, or choose '
          f'config.env_backend from: {", ".join(BACKENDS)}') from None
  if task.family == atari.FAMILY:
    known = (atari.envpool_id if backend == 'envpool' else atari.ale_id)
    if not known(task.name):
      raise errors.LaunchError(atari.unknown_game_message(env_name, backend))
    return task
  if task.family == minatar.FAMILY:
    if task.name not in minatar.games():
      raise errors.LaunchError(minatar.unknown_game_message(env_name))
    return task
  if task.family == pomdp.FAMILY:
    if task.name not in pomdp.KEPT:
      raise errors.LaunchError(pomdp.unknown_task_message(env_name))
    return task
  name = task.name
  if task.family == 'gymnasium' and ':' in name:
    # Gymnasium's MODULE:ID, or MODULE:CLASS of the user's (envs/user.py).
    if user.gymnasium_class(name) is not None:
      if backend == 'envpool':
        raise errors.LaunchError(
            f'config.env_backend envpool runs EnvPool\'s own tasks, not '
            f'{env_name!r}: use config.env_backend=gym')
      return task
    name = user.split(name)[1]
  if task.family == 'gym' and ':' in name:
    # gym's MODULE:ID: importing the module registers ID, as gym.make does.
    module, _, name = name.partition(':')
    try:
      importlib.import_module(module)
    except Exception as e:
      raise errors.LaunchError(
          f'config.env_name {env_name!r}: importing {module} failed: '
          f'{type(e).__name__}: {" ".join(str(e).split())[:200]}') from None
  known = _family_tasks(task.family)
  if name not in known:
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: unknown {task.family} task; known: '
        f'{", ".join(known)}')
  if backend == 'envpool' and not task_envpool_id(task):
    gym_tasks = [t for t in _envpool_tasks() if t in _family_tasks('gym')]
    dmc_tasks = [t for t in _family_tasks('dmc')
                 if task_envpool_id(Task('dmc', t))]
    raise errors.LaunchError(
        f'config.env_backend envpool does not run {env_name!r}; it runs '
        f'these gym tasks: {", ".join(sorted(gym_tasks))}; and these dmc '
        f'tasks: {", ".join(f"dmc:{t}" for t in dmc_tasks)} (other tasks: '
        'config.env_backend=gym)')
  return task
