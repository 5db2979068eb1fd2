"""Environments from the user's own code: a factory, or a Gymnasium class.

`config.env_name` forms handled here (the registry parses them: the user
family claims MODULE:FN, families.py's gymnasium family MODULE:CLASS):

  my_project.envs:make_env             a callable in an importable module:
                                       make_env(seed) or make_env(seed,
                                       config) -> a dm_env.Environment
  gymnasium:my_project.envs:MyEnv      a gymnasium.Env subclass, made with
                                       no arguments (`gymnasium:MODULE:ID`,
                                       an id the module registers, is
                                       Gymnasium's own form)

The launcher calls the factory once per environment with that
environment's own seed (node_seed), exactly where it would make a shipped
task, so per-node seeds, N environments per actor, the final evaluation and
resume apply unchanged.
"""

import importlib
import importlib.util
import inspect
from typing import Any, Callable, Optional

from acme_launch import errors
from acme_launch.envs import registry

FAMILY = 'user'


def split(env_name: str):
  """'pkg.mod:attr' -> ('pkg.mod', 'attr')."""
  module, _, attr = env_name.rpartition(':')
  return module, attr


def import_attr(env_name: str, what: str) -> Optional[Any]:
  """The attribute `env_name` names (None if the module lacks it);
  LaunchError if the module cannot be imported."""
  module_name, attr = split(env_name)
  try:
    module = importlib.import_module(module_name)
  except Exception as e:
    raise errors.LaunchError(
        f'config.env_name {what!r}: importing {module_name} failed: '
        f'{type(e).__name__}: {" ".join(str(e).split())[:200]}') from None
  return getattr(module, attr, None)


def is_module(name: str) -> bool:
  try:
    return importlib.util.find_spec(name) is not None
  except (ImportError, ValueError):
    return False


def _has_attr(module: str, name: str) -> bool:
  try:
    return hasattr(importlib.import_module(module), name)
  except Exception:
    return False  # The check reports the import error.


def _gym_registered(name: str) -> bool:
  import gym
  return name in gym.envs.registry


def claims(env_name: str) -> bool:
  """MODULE:FN is a factory of the user's where MODULE has FN, or where FN
  is no id gym registers (gym's MODULE:ID form otherwise)."""
  module, sep, name = env_name.partition(':')
  return bool(sep) and is_module(module) and name.isidentifier() and (
      _has_attr(module, name) or not _gym_registered(name))


def check(name: str, env_name: str, backend: str) -> None:
  factory(env_name)


def factory(env_name: str) -> Callable:
  """The user's factory; LaunchError (one line) if it is not a callable."""
  function = import_attr(env_name, env_name)
  if not callable(function):
    module_name, attr = split(env_name)
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: module {module_name} has no callable '
        f'{attr!r} (a factory make_env(seed) or make_env(seed, config) '
        'returning a dm_env.Environment)')
  return function


def make(env_name: str, seed: int, config=None):
  """The factory's environment for `seed`, checked to be a dm_env one."""
  import dm_env
  function = factory(env_name)
  try:
    wants_config = 'config' in inspect.signature(function).parameters
  except (TypeError, ValueError):  # A builtin or C callable: seed alone.
    wants_config = False
  try:
    environment = (function(int(seed), config=config) if wants_config
                   else function(int(seed)))
  except Exception as e:
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: the factory raised '
        f'{type(e).__name__}: {" ".join(str(e).split())[:200]}') from e
  if not isinstance(environment, dm_env.Environment):
    raise errors.LaunchError(
        f'config.env_name {env_name!r}: the factory returned a '
        f'{type(environment).__module__}.{type(environment).__name__}, not a '
        'dm_env.Environment (a Gymnasium env: name it as '
        'gymnasium:MODULE:CLASS or gymnasium:MODULE:ID)')
  return environment


def gymnasium_class(name: str):
  """For gymnasium:MODULE:ATTR: the gymnasium.Env subclass ATTR names, or
  None when ATTR is an id the module registers."""
  import gymnasium
  target = import_attr(name, f'gymnasium:{name}')
  if inspect.isclass(target) and issubclass(target, gymnasium.Env):
    return target
  return None


USER = registry.register_family(registry.Family(
    FAMILY, ('gym',), (), check, make, claims=claims,
    backend_error='config.env_backend {backend} runs EnvPool\'s own tasks, '
    'not {env_name!r}: use config.env_backend=gym for a factory of yours'))
