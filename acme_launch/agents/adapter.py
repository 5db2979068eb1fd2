"""An agent as one value: the `Adapter` the launcher builds a program from.

Every agent, shipped or a user's, is one frozen `Adapter`: three functions
the launcher calls with the same arguments for every agent, and what its
learner and actors need, declared as fields rather than probed from its
builder (Acme's builders keep those settings in private attributes, which
differ from one builder to the next). A user's module declares
`ADAPTER = Adapter(...)`, or defines the functions and capitalised
constants that `loader.from_module` turns into the same value.

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

and, defaulted (module constant in brackets):

  learner_devices        [LEARNER_DEVICES] 1: the devices its learner runs
                         on, a count or 'any' (ANY_DEVICES: a learner that
                         pmaps over all the devices its process has, as
                         Acme's IMPALA and R2D2 do). The config's
                         `resources.learner.num_devices` must be one it
                         takes (refused before launch otherwise); the plan
                         gives the learner's process that many devices
  actor_variables        [ACTOR_VARIABLES] 'policy': the learner variables
                         its actor fetches (`learner.get_variables([name])`)
  variable_update_period [VARIABLE_UPDATE_PERIOD] 1: every how many updates
                         its builder's actors fetch them, an int or a
                         function of the config; the loops that step the
                         policy themselves (batched actors, the final
                         evaluation) fetch as often. A config section's
                         `variable_update_period` overrides it
  policy_returns_extras  [POLICY_RETURNS_EXTRAS] False: the policy returns
                         (actions, extras) (PPO's log-probs) rather than
                         actions alone
  batched_adder          [BATCHED_ADDER] False: the builder has
                         `make_batched_adder(replay_client, environment_spec,
                         num_envs)` (adders/batched.py) for actors with
                         envs_per_actor > 1; otherwise each environment gets
                         its own `builder.make_adder()`
  recurrent              [RECURRENT] False: the policy keeps state between
                         steps (R2D2's LSTM): the final evaluation plays with
                         the builder's actor, and actors step one environment
                         each (envs_per_actor > 1 is refused before launch)
                         unless it has make_actor_core
  make_actor_core        (config, networks, policy) -> for a recurrent agent,
                         the Acme `ActorCore` (init, select_action,
                         get_extras) its builder's actor runs; actors with
                         envs_per_actor > 1 then step it for all their
                         environments at once, one state per environment
                         (program/recurrent_actor.py). None: no such core
  actor_policy_inputs    (config, actor_index) -> the data by which actor
                         `actor_index`'s behaviour policy differs from the
                         others' (DQN's Ape-X epsilons), or None. Central
                         inference (config.inference='central') makes one
                         policy without `actor_index` and calls it as
                         policy(params, key, observations, inputs) for each
                         actor's rows; an agent whose make_policy takes
                         `actor_index` needs it there. None: no such data
  replay_tables          (config, environment_spec) -> what its replay tables
                         hold, as `plan.replay_memory.TableLayout`s; the
                         launcher estimates the replay node's memory from
                         them and refuses a plan that cannot hold it
                         (docs/resources-and-gpus.md#replay-memory). None:
                         the replay node's memory is not planned
  saved_variables        (learner_state, name) -> the variables
                         `learner.get_variables([name])` returns, read from
                         the state its `save()` returns (what the learner
                         checkpoint holds): how `python -m
                         acme_launch.evaluate` and `export` act with a
                         finished run's policy without a learner. None: Acme's
                         learners' way, `policy_params` for 'policy' where
                         the state has them, else `params`
                         (`saved_actor_variables`)
  section                the config section of its settings; '' (the
                         default): named like its module's last part
                         (`config.ppo`, `config.my_dqn`)

`module_name` is filled in by `loader.load`: the module it came from, which
every node process imports again (the program is pickled by reference), so
every function must be defined at a module's top level.
"""

import dataclasses
import inspect
from typing import Any, Callable, Optional, Union

ConfigFunction = Callable[[Any], int]
ANY_DEVICES = 'any'  # learner_devices of a learner that takes any number.


@dataclasses.dataclass(frozen=True)
class Adapter:
  """One agent: its three functions and what its learner and actors need."""
  make_builder: Callable[..., Any]
  make_networks: Callable[..., Any]
  make_policy: Callable[..., Any]
  learner_devices: Union[int, str] = 1
  actor_variables: str = 'policy'
  variable_update_period: Union[int, ConfigFunction] = 1
  policy_returns_extras: bool = False
  batched_adder: bool = False
  recurrent: bool = False
  make_actor_core: Optional[Callable[..., Any]] = None
  replay_tables: Optional[Callable[..., Any]] = None
  section: str = ''
  module_name: str = ''
  actor_policy_inputs: Optional[Callable[..., Any]] = None
  saved_variables: Optional[Callable[..., Any]] = None

  def update_period(self, config) -> int:
    """Every how many updates its actors fetch the learner's variables:
    the config section's `variable_update_period` where it sets one, else
    the adapter's own (its builder's actors' period)."""
    section = config.get(self.section) or {}
    period = section.get('variable_update_period')
    if period:
      return int(period)
    declared = self.variable_update_period
    return int(declared(config) if callable(declared) else declared)

  def uses_devices(self, count: int) -> bool:
    """Whether its learner runs on `count` devices."""
    return self.learner_devices in (ANY_DEVICES, count)

  def devices_text(self) -> str:
    """'any number of devices', '1 device', '2 devices'."""
    devices = self.learner_devices
    if devices == ANY_DEVICES:
      return 'any number of devices'
    return f'{devices} device{"s" if devices != 1 else ""}'


FUNCTIONS = ('make_builder', 'make_networks', 'make_policy')
OPTIONAL_FUNCTIONS = ('make_actor_core', 'actor_policy_inputs', 'replay_tables',
                      'saved_variables')
FLAGS = ('policy_returns_extras', 'batched_adder', 'recurrent')


def problem(adapter: Adapter, name=str) -> Optional[str]:
  """What is wrong with `adapter`'s fields, as one phrase, or None.
  `name(field)` is how the user wrote the field (`ADAPTER.recurrent`,
  `RECURRENT`)."""

  def kind(value) -> str:
    return type(value).__name__

  for field in FUNCTIONS + OPTIONAL_FUNCTIONS:
    value = getattr(adapter, field)
    if not callable(value) and not (value is None and field not in FUNCTIONS):
      return f'{name(field)} is not a function (got {kind(value)})'
  devices = adapter.learner_devices
  if devices != ANY_DEVICES and (isinstance(devices, bool) or
                                 not isinstance(devices, int) or devices < 1):
    return (f'{name("learner_devices")} must be an int >= 1 or '
            f'{ANY_DEVICES!r}, got {devices!r}')
  if not isinstance(adapter.actor_variables, str):
    return (f'{name("actor_variables")} must be a str, got '
            f'{kind(adapter.actor_variables)}')
  period = adapter.variable_update_period
  if not callable(period) and (isinstance(period, bool) or
                               not isinstance(period, int) or period < 1):
    return (f'{name("variable_update_period")} must be an int >= 1 or a '
            f'function of the config, got {period!r}')
  for field in FLAGS:
    if not isinstance(getattr(adapter, field), bool):
      return (f'{name(field)} must be True or False, got '
              f'{getattr(adapter, field)!r}')
  if not isinstance(adapter.section, str):
    return f'{name("section")} must be a str, got {kind(adapter.section)}'
  return None


def takes_actor_index(adapter: Adapter) -> bool:
  """Whether its make_policy takes `actor_index` (policies that differ by
  actor)."""
  return 'actor_index' in inspect.signature(adapter.make_policy).parameters


def central_inference_problem(adapter: Adapter) -> Optional[str]:
  """Why one inference node cannot serve this agent's actors, as a
  phrase, or None (program/inference.py): a recurrent agent's node steps
  its actor core for every environment; a feed-forward one calls one
  policy for every actor, with each actor's differences as data."""
  if adapter.recurrent and adapter.make_actor_core is None:
    return ('it keeps recurrent state and has no make_actor_core (the '
            'actor core the node steps for every environment)')
  if takes_actor_index(adapter) and (adapter.recurrent or
                                     adapter.actor_policy_inputs is None):
    return ('its make_policy takes actor_index (a policy per actor) and it '
            'declares no actor_policy_inputs (what differs by actor, as '
            'data the node passes to one policy)')
  return None


def make_actor_policy(adapter: Adapter, config, networks, environment_spec,
                      actor_index: int):
  """Actor `actor_index`'s behaviour policy: make_policy(..., evaluation=
  False), with `actor_index=` where make_policy takes that keyword."""
  kwargs = {}
  if takes_actor_index(adapter):
    kwargs['actor_index'] = actor_index
  return adapter.make_policy(config, networks, environment_spec,
                             evaluation=False, **kwargs)


def make_variable_client(adapter: Adapter, config, variable_source,
                         device: str = 'cpu', updates_per_fetch: int = 1):
  """The client the agent's own actor makes, for the loops that step its
  policy themselves (batched actors, the final evaluation, the inference
  node): its actor_variables, fetched every `adapter.update_period(config)`
  updates (times `updates_per_fetch`: the inference node updates once per
  actor call), onto JAX's `device` ('cpu', 'gpu')."""
  from acme_launch import compat  # JAX aliases; before acme
  from acme.jax import variable_utils
  return variable_utils.VariableClient(
      variable_source, adapter.actor_variables, device=device,
      update_period=adapter.update_period(config) * updates_per_fetch)


def saved_actor_variables(adapter: Adapter, state):
  """The variables its actors fetch (`actor_variables`), from its learner's
  saved state: `adapter.saved_variables` where it declares one, else Acme's
  learners' way (their get_variables reads `policy_params` for 'policy',
  `params` otherwise). AttributeError if the state has neither."""
  if adapter.saved_variables is not None:
    return adapter.saved_variables(state, adapter.actor_variables)
  if adapter.actor_variables == 'policy' and hasattr(state, 'policy_params'):
    return state.policy_params
  return state.params
