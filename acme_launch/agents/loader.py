"""`config.agent` to its `Adapter`: the shipped agents and a user's alike.

`config.agent` names a module: a shipped agent by its short name (`ppo`,
`sac`, `td3`, `d4pg`, `dqn`, `r2d2`, `impala`: `acme_launch.agents.<name>`),
or any importable module by its dotted name (`my_project.agents.my_dqn`,
found on PYTHONPATH or beside the config file). A module that defines
`ADAPTER` is taken as it is; otherwise its functions and capitalised
constants are read into the same value (`from_module`, the shorthand).
Whatever is wrong with either is one line naming the module, before any
process starts.
"""

import dataclasses
import importlib
import inspect

from acme_launch import errors
from acme_launch.agents import adapter as adapter_lib
from acme_launch.agents.adapter import Adapter

SHIPPED = ('ppo', 'sac', 'td3', 'd4pg', 'dqn', 'r2d2', 'impala')
FUNCTIONS = adapter_lib.FUNCTIONS

def read_devices(value):
  """LEARNER_DEVICES as the field: 'any', or a count (2.0 is 2)."""
  return value if value == adapter_lib.ANY_DEVICES else int(value)


# The module shorthand's constants: (Adapter field, how its value is read).
CONSTANTS = {'LEARNER_DEVICES': ('learner_devices', read_devices),
             'ACTOR_VARIABLES': ('actor_variables', str),
             'VARIABLE_UPDATE_PERIOD': ('variable_update_period', None),
             'POLICY_RETURNS_EXTRAS': ('policy_returns_extras', bool),
             'BATCHED_ADDER': ('batched_adder', bool),
             'RECURRENT': ('recurrent', bool)}


def module_name(agent: str) -> str:
  return f'acme_launch.agents.{agent}' if agent in SHIPPED else agent


def section_name(agent: str) -> str:
  """'ppo' -> 'ppo'; 'my_project.agents.my_dqn' -> 'my_dqn'."""
  return agent.rsplit('.', 1)[-1]


def load(agent: str) -> Adapter:
  """The adapter `config.agent` names; LaunchError (one line) if it cannot
  be imported, lacks a function or has a field of the wrong type."""
  name = module_name(agent)
  if not name or not all(part.isidentifier() for part in name.split('.')):
    raise errors.LaunchError(
        f'config.agent {agent!r} is neither a shipped agent '
        f'({", ".join(SHIPPED)}) nor a module name like my_project.my_agent')
  try:
    module = importlib.import_module(name)
  except ModuleNotFoundError as e:
    if e.name and name.startswith(e.name) and agent not in SHIPPED:
      raise errors.LaunchError(
          f'config.agent {agent!r}: no module {e.name!r} on the path (shipped '
          f'agents: {", ".join(SHIPPED)}; a module of yours must be on '
          'PYTHONPATH or beside the config file)') from None
    raise import_error(agent, e) from None
  except Exception as e:
    raise import_error(agent, e) from None
  if hasattr(module, 'ADAPTER'):
    adapter = module.ADAPTER
    if not isinstance(adapter, Adapter):
      raise errors.LaunchError(
          f'config.agent {agent!r}: {name}.ADAPTER is a '
          f'{type(adapter).__name__}, not an acme_launch.agents.Adapter')
    wrong = adapter_lib.problem(adapter, lambda field: f'ADAPTER.{field}')
  else:
    adapter = from_module(agent, module)
    fields = {field: constant for constant, (field, _) in CONSTANTS.items()}
    wrong = adapter_lib.problem(adapter, lambda f: fields.get(f, f))
  if wrong:
    raise errors.LaunchError(f'config.agent {agent!r}: {name}: {wrong}')
  return dataclasses.replace(
      adapter, module_name=name, section=adapter.section or section_name(agent))


def from_module(agent: str, module) -> Adapter:
  """The module shorthand as an Adapter: its three functions, its optional
  make_actor_core and replay_tables, and the constants it defines (read as
  before: `LEARNER_DEVICES = 2.0` is 2)."""
  missing = [f for f in FUNCTIONS if not callable(getattr(module, f, None))]
  if missing:
    raise errors.LaunchError(
        f'config.agent {agent!r}: module {module.__name__} defines no '
        f'{", ".join(missing)} (an adapter needs {", ".join(FUNCTIONS)}, or '
        'ADAPTER = acme_launch.agents.Adapter(...))')
  fields = {f: getattr(module, f) for f in FUNCTIONS}
  for function in adapter_lib.OPTIONAL_FUNCTIONS:
    fields[function] = getattr(module, function, None)
  for constant, (field, read) in CONSTANTS.items():
    if not hasattr(module, constant):
      continue
    value = getattr(module, constant)
    try:
      fields[field] = value if read is None else read(value)
    except (TypeError, ValueError):
      kind = {int: 'an int', read_devices: "an int or 'any'"}.get(read,
                                                                  'a str')
      raise errors.LaunchError(
          f'config.agent {agent!r}: {module.__name__}.{constant} must be '
          f'{kind}, got {value!r}') from None
  return Adapter(**fields)


def import_error(agent: str, error: Exception) -> errors.LaunchError:
  return errors.LaunchError(
      f'config.agent {agent!r}: importing {module_name(agent)} failed: '
      f'{type(error).__name__}: {" ".join(str(error).split())[:200]}')


def call(adapter: Adapter, function: str, *args, **kwargs):
  """adapter.<function>(...), with anything it raises (other than a
  LaunchError of its own) reported as one line naming the module."""
  try:
    return getattr(adapter, function)(*args, **kwargs)
  except errors.LaunchError:
    raise
  except Exception as e:
    where = ''
    frames = inspect.trace()
    if frames:
      where = f' ({frames[-1].filename}:{frames[-1].lineno})'
    raise errors.LaunchError(
        f'config.agent {adapter.module_name}: {function} raised '
        f'{type(e).__name__}: {" ".join(str(e).split())[:200]}{where}'
    ) from e
