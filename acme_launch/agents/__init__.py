"""Agents: how the launcher finds an agent's adapter, and what one is.

`config.agent` names an adapter module: a shipped one by its short name
(`ppo`, `sac`, `td3`, `d4pg`, `dqn`, `r2d2`, `impala`:
`acme_launch.agents.<name>`), or any
importable module by its dotted name (`my_project.agents.my_dqn`, found on
PYTHONPATH or beside the config file). Shipped and user adapters load the
same way (`load`). An adapter module defines three functions:

  make_builder(config, learner_logger_fn, environment_spec)
      -> an Acme `ActorLearnerBuilder`; values a config derives from the
         environment (e.g. SAC's target entropy) are derived here, and bad
         agent fields raise `errors.LaunchError` (exit 2, nothing started)
  make_networks(config, environment_spec) -> the agent's networks
  make_policy(config, networks, environment_spec, evaluation)
      -> the policy `builder.make_actor` takes: the actors' behaviour policy,
         or the evaluator's when `evaluation` is true. Actors that step
         several environments call it on a batch of observations. A
         make_policy that takes an `actor_index` keyword gets the actor's
         index (0 .. num_actors - 1), for settings that differ by actor
         (DQN's Ape-X epsilons)

and may declare what its learner and actors need (defaults in brackets):

  LEARNER_DEVICES        int [1]: devices its learner uses; the resource
                         planner gives the learner that many GPUs
  ACTOR_VARIABLES        str ['policy']: the learner variables its actor
                         fetches (`learner.get_variables([name])`)
  POLICY_RETURNS_EXTRAS  bool [False]: the policy returns (actions, extras)
                         (PPO's log-probs) rather than actions alone
  BATCHED_ADDER          bool [False]: the builder has `make_batched_adder(
                         replay_client, environment_spec, num_envs)` (see
                         adders/batched.py) for actors with
                         envs_per_actor > 1; otherwise each environment gets
                         its own `builder.make_adder()`
  RECURRENT              bool [False]: the policy keeps state between steps
                         (R2D2's LSTM): the final evaluation plays with the
                         builder's actor, and actors step one environment
                         each (envs_per_actor > 1 is refused before launch)
                         unless the module has make_actor_core
  make_actor_core(config, networks, policy)
                         [none]: for a RECURRENT agent, the Acme `ActorCore`
                         (init, select_action, get_extras) its builder's
                         actor runs; actors with envs_per_actor > 1 then
                         step it for all their environments at once, one
                         state per environment (program/recurrent_actor.py),
                         each with its own `builder.make_adder()`
  replay_tables(config, environment_spec)
                         [none]: what its replay tables hold, as
                         `plan.replay_memory.TableLayout`s (items at most,
                         the columns of a step, steps an item spans and
                         adds, the config fields that size them); the
                         launcher estimates the replay node's memory from
                         them and refuses a plan that cannot hold it
                         (docs/resources-and-gpus.md#replay-memory).
                         Without it the replay node's memory is not planned

The agent's own settings are the config section named like the module's
last part (`config.ppo`, `config.my_dqn`); see docs/own-agents-and-envs.md.
"""

import dataclasses
import importlib
import inspect
from typing import Any, Callable, Optional, Protocol

from acme_launch import errors

SHIPPED = ('ppo', 'sac', 'td3', 'd4pg', 'dqn', 'r2d2', 'impala')
FUNCTIONS = ('make_builder', 'make_networks', 'make_policy')


class AdapterModule(Protocol):
  """What an adapter module provides (the capabilities are optional)."""

  def make_builder(self, config, learner_logger_fn: Callable[[], Any],
                   environment_spec) -> Any: ...

  def make_networks(self, config, environment_spec) -> Any: ...

  def make_policy(self, config, networks, environment_spec,
                  evaluation: bool) -> Callable[..., Any]: ...


@dataclasses.dataclass(frozen=True)
class Adapter:
  """An adapter module as the launcher uses it, capabilities defaulted."""
  module_name: str
  section: str                 # The config section of its settings.
  make_builder: Callable[..., Any]
  make_networks: Callable[..., Any]
  make_policy: Callable[..., Any]
  learner_devices: int = 1
  actor_variables: str = 'policy'
  policy_returns_extras: bool = False
  batched_adder: bool = False
  recurrent: bool = False
  replay_tables: Optional[Callable[..., Any]] = None
  make_actor_core: Optional[Callable[..., Any]] = None


def module_name(agent: str) -> str:
  return f'acme_launch.agents.{agent}' if agent in SHIPPED else agent


def section_name(agent: str) -> str:
  """'ppo' -> 'ppo'; 'my_project.agents.my_dqn' -> 'my_dqn'."""
  return agent.rsplit('.', 1)[-1]


def load(agent: str) -> Adapter:
  """The adapter `config.agent` names; LaunchError (one line) if it cannot
  be imported or lacks a function."""
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
    raise _import_error(agent, e) from None
  except Exception as e:
    raise _import_error(agent, e) from None
  missing = [f for f in FUNCTIONS if not callable(getattr(module, f, None))]
  if missing:
    raise errors.LaunchError(
        f'config.agent {agent!r}: module {name} defines no '
        f'{", ".join(missing)} (an adapter needs {", ".join(FUNCTIONS)})')
  return Adapter(
      module_name=name, section=section_name(agent),
      **{f: getattr(module, f) for f in FUNCTIONS},
      learner_devices=int(getattr(module, 'LEARNER_DEVICES', 1)),
      actor_variables=str(getattr(module, 'ACTOR_VARIABLES', 'policy')),
      policy_returns_extras=bool(
          getattr(module, 'POLICY_RETURNS_EXTRAS', False)),
      batched_adder=bool(getattr(module, 'BATCHED_ADDER', False)),
      recurrent=bool(getattr(module, 'RECURRENT', False)),
      replay_tables=_optional(module, 'replay_tables'),
      make_actor_core=_optional(module, 'make_actor_core'))


def _optional(module, function: str) -> Optional[Callable[..., Any]]:
  value = getattr(module, function, None)
  return value if callable(value) else None


def _import_error(agent: str, error: Exception) -> errors.LaunchError:
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


def make_actor_policy(adapter: Adapter, config, networks, environment_spec,
                      actor_index: int):
  """Actor `actor_index`'s behaviour policy: make_policy(..., evaluation=
  False), with `actor_index=` where make_policy takes that keyword."""
  kwargs = {}
  if 'actor_index' in inspect.signature(adapter.make_policy).parameters:
    kwargs['actor_index'] = actor_index
  return adapter.make_policy(config, networks, environment_spec,
                             evaluation=False, **kwargs)


def make_variable_client(adapter: Adapter, config, variable_source,
                         builder=None):
  """The client the agent's own actor makes, for the loops that step its
  policy themselves (batched actors, the final evaluation): its
  actor_variables, fetched every `variable_update_period` updates of its
  config section when the section sets it, else as often as `builder`'s own
  actors fetch (Acme's R2D2 every 400 updates, IMPALA every 1,000, the
  others on every update)."""
  from acme_launch import compat
  from acme.jax import variable_utils
  section = config.get(adapter.section) or {}
  period = section.get('variable_update_period') or _builder_update_period(
      builder)
  return variable_utils.VariableClient(
      variable_source, adapter.actor_variables, device='cpu',
      update_period=period)


def _builder_update_period(builder) -> int:
  """How often `builder`'s own actors fetch parameters: the shipped IMPALA
  builder keeps it on itself, Acme's R2D2 and PPO builders in their config,
  Acme's IMPALA builder in its make_actor (1,000); else every update (1)."""
  for holder, name in ((builder, '_variable_update_period'),
                       (getattr(builder, '_config', None),
                        'variable_update_period')):
    value = getattr(holder, name, None)
    if isinstance(value, int) and value >= 1:
      return value
  # Acme's IMPALABuilder keeps its actors' period in make_actor itself.
  if any(c.__module__ == 'acme.agents.jax.impala.builder'
         for c in type(builder).__mro__):
    return 1000
  return 1

