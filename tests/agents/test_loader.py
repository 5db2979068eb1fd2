"""agents.load: a module that declares ADAPTER and one in the module shorthand
load to the same Adapter; whatever is wrong with either is one line. In
process, on modules written into a folder on the path, as a user's are."""

import dataclasses
import textwrap

import ml_collections
import pytest

from acme_launch import agents
from acme_launch import errors

FUNCTIONS = '''
def make_builder(config, learner_logger_fn, environment_spec):
  return 'builder'


def make_networks(config, environment_spec):
  return 'networks'


def make_policy(config, networks, environment_spec, evaluation):
  return 'policy'


def make_actor_core(config, networks, policy):
  return 'core'


def replay_tables(config, environment_spec):
  return ()
'''

MODULE_FORM = FUNCTIONS + '''
LEARNER_DEVICES = 2
ACTOR_VARIABLES = 'network'
VARIABLE_UPDATE_PERIOD = 40
POLICY_RETURNS_EXTRAS = True
BATCHED_ADDER = True
RECURRENT = True
'''

VALUE_FORM = '''
from acme_launch.agents import Adapter
from user_agents.module_form import (make_builder, make_networks, make_policy,
                                     make_actor_core, replay_tables)

ADAPTER = Adapter(
    make_builder=make_builder, make_networks=make_networks,
    make_policy=make_policy, learner_devices=2, actor_variables='network',
    variable_update_period=40, policy_returns_extras=True,
    batched_adder=True, recurrent=True, make_actor_core=make_actor_core,
    replay_tables=replay_tables, section='module_form')
'''


@pytest.fixture
def user_agents(tmp_path, monkeypatch):
  """Writes modules into the package `user_agents` on the path: name -> text."""
  package = tmp_path / 'user_agents'
  package.mkdir()
  (package / '__init__.py').write_text('')
  monkeypatch.syspath_prepend(str(tmp_path))

  def write(name: str, text: str) -> str:
    (package / f'{name}.py').write_text(textwrap.dedent(text))
    return f'user_agents.{name}'

  yield write
  import sys
  for name in [m for m in sys.modules if m.startswith('user_agents')]:
    del sys.modules[name]


def test_the_module_shorthand_and_an_adapter_value_load_to_equal_adapters(
    user_agents):
  from_module = agents.load(user_agents('module_form', MODULE_FORM))
  from_value = agents.load(user_agents('value_form', VALUE_FORM))
  assert isinstance(from_module, agents.Adapter)
  assert from_module.module_name == 'user_agents.module_form'
  assert from_value.module_name == 'user_agents.value_form'
  # The same capabilities and functions; only where each came from differs.
  assert from_value == dataclasses.replace(
      from_module, module_name='user_agents.value_form')
  assert (from_module.learner_devices, from_module.recurrent) == (2, True)
  with pytest.raises(dataclasses.FrozenInstanceError):
    from_value.recurrent = False


def test_the_shorthand_with_only_the_functions_gets_the_defaults(user_agents):
  adapter = agents.load(user_agents('plain', FUNCTIONS.split(
      'def make_actor_core')[0]))
  assert adapter == agents.Adapter(
      make_builder=adapter.make_builder, make_networks=adapter.make_networks,
      make_policy=adapter.make_policy, section='plain',
      module_name='user_agents.plain')
  assert (adapter.learner_devices, adapter.actor_variables) == (1, 'policy')
  assert adapter.make_actor_core is None and adapter.replay_tables is None


def test_a_learner_takes_its_count_or_any_number_of_devices(user_agents):
  """LEARNER_DEVICES = 'any' (ANY_DEVICES) in either form: a learner that
  pmaps over every device its process has; a count: exactly that many."""
  user_agents('module_form', MODULE_FORM)
  any_module = agents.load(user_agents('any_module', MODULE_FORM.replace(
      'LEARNER_DEVICES = 2', 'LEARNER_DEVICES = "any"')))
  any_value = agents.load(user_agents('any_value', VALUE_FORM.replace(
      'learner_devices=2', 'learner_devices=agents.ANY_DEVICES').replace(
          'from acme_launch.agents import Adapter',
          'from acme_launch import agents\nfrom acme_launch.agents import '
          'Adapter')))
  for adapter in (any_module, any_value):
    assert adapter.learner_devices == 'any'
    assert all(adapter.uses_devices(n) for n in (1, 2, 8))
    assert adapter.devices_text() == 'any number of devices'
  two = agents.load('user_agents.module_form')
  assert [two.uses_devices(n) for n in (1, 2, 3)] == [False, True, False]
  assert two.devices_text() == '2 devices'
  # The shipped agents: IMPALA's and R2D2's learners pmap, the rest do not.
  assert {agent: agents.load(agent).learner_devices
          for agent in agents.SHIPPED} == {
              'ppo': 1, 'sac': 1, 'td3': 1, 'd4pg': 1, 'dqn': 1,
              'r2d2': 'any', 'impala': 'any'}
  assert agents.load('ppo').devices_text() == '1 device'


def test_each_shipped_agent_is_an_adapter_value_its_module_declares():
  import importlib
  for agent in agents.SHIPPED:
    module = importlib.import_module(f'acme_launch.agents.{agent}')
    assert isinstance(module.ADAPTER, agents.Adapter), agent
    assert agents.load(agent) == dataclasses.replace(
        module.ADAPTER, module_name=f'acme_launch.agents.{agent}',
        section=agent)


def test_the_update_period_is_the_adapters_unless_the_section_sets_one(
    user_agents):
  user_agents('module_form', MODULE_FORM)
  adapter = agents.load(user_agents('value_form', VALUE_FORM.replace(
      'variable_update_period=40',
      'variable_update_period=lambda config: config.period')))
  config = ml_collections.ConfigDict({'period': 7, 'module_form': {}})
  assert adapter.update_period(config) == 7
  config.module_form.variable_update_period = 3
  assert adapter.update_period(config) == 3
  assert agents.load('r2d2').update_period(ml_collections.ConfigDict(
      {'r2d2': {}})) == 400  # Acme's R2D2Config default.
  assert agents.load('impala').update_period(ml_collections.ConfigDict(
      {'impala': {}})) == 1000  # Acme's IMPALA actor's.
  assert agents.load('dqn').update_period(ml_collections.ConfigDict(
      {'dqn': {}})) == 1


@pytest.mark.parametrize('text, expected', [
    ('ADAPTER = "dqn"',
     "user_agents.bad.ADAPTER is a str, not an acme_launch.agents.Adapter"),
    (VALUE_FORM.replace('make_policy=make_policy', 'make_policy="greedy"'),
     'user_agents.bad: ADAPTER.make_policy is not a function (got str)'),
    (VALUE_FORM.replace('learner_devices=2', 'learner_devices=0'),
     "user_agents.bad: ADAPTER.learner_devices must be an int >= 1 or 'any', "
     'got 0'),
    (VALUE_FORM.replace('learner_devices=2', 'learner_devices="all"'),
     "ADAPTER.learner_devices must be an int >= 1 or 'any', got 'all'"),
    (VALUE_FORM.replace('recurrent=True', 'recurrent="yes"'),
     "user_agents.bad: ADAPTER.recurrent must be True or False, got 'yes'"),
    (VALUE_FORM.replace('variable_update_period=40',
                        'variable_update_period=0'),
     'ADAPTER.variable_update_period must be an int >= 1 or a function'),
    (FUNCTIONS.replace('def make_networks', 'def make_networks_later'),
     'module user_agents.bad defines no make_networks'),
    (MODULE_FORM.replace('LEARNER_DEVICES = 2', 'LEARNER_DEVICES = "two"'),
     "user_agents.bad.LEARNER_DEVICES must be an int or 'any', got 'two'"),
    (MODULE_FORM + 'replay_tables = 3\n',
     'user_agents.bad: replay_tables is not a function (got int)'),
    (MODULE_FORM.replace('VARIABLE_UPDATE_PERIOD = 40',
                         'VARIABLE_UPDATE_PERIOD = 2.5'),
     'user_agents.bad: VARIABLE_UPDATE_PERIOD must be an int >= 1'),
    ('from acme_launch.agents import Adapter\n'
     'ADAPTER = Adapter(make_builder=print)\n',
     'importing user_agents.bad failed: TypeError'),
])
def test_a_bad_adapter_is_one_line(user_agents, text, expected):
  user_agents('module_form', MODULE_FORM)
  with pytest.raises(errors.LaunchError) as raised:
    agents.load(user_agents('bad', text))
  message = str(raised.value)
  assert message.startswith("config.agent 'user_agents.bad': "), message
  assert expected in message and '\n' not in message, message
