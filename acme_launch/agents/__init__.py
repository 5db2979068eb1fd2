"""Agents: an agent is one `Adapter` value (adapter.py), which `load` finds
by the name `config.agent` gives (loader.py); the shipped agents are the
folders beside this file, each declaring its `ADAPTER`.

The launcher and its tests use these names; a user's adapter needs only
`Adapter` (docs/own-agents-and-envs.md).
"""

from acme_launch.agents.adapter import ANY_DEVICES
from acme_launch.agents.adapter import Adapter
from acme_launch.agents.adapter import central_inference_problem
from acme_launch.agents.adapter import make_actor_policy
from acme_launch.agents.adapter import make_variable_client
from acme_launch.agents.adapter import saved_actor_variables
from acme_launch.agents.loader import FUNCTIONS
from acme_launch.agents.loader import SHIPPED
from acme_launch.agents.loader import call
from acme_launch.agents.loader import load
from acme_launch.agents.loader import module_name
from acme_launch.agents.loader import section_name

__all__ = ['ANY_DEVICES', 'Adapter', 'FUNCTIONS', 'SHIPPED', 'call',
           'central_inference_problem', 'load',
           'make_actor_policy', 'make_variable_client', 'module_name',
           'saved_actor_variables',
           'section_name']
