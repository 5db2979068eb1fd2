"""Per-agent adapters: each turns a config into Acme's builder pieces.

An adapter module exposes three functions and nothing else is agent-specific:
  make_builder(config, learner_logger_fn) -> an Acme `ActorLearnerBuilder`
  make_networks(config, environment_spec) -> the agent's networks
  make_policy(networks, evaluation) -> the policy `builder.make_actor` takes
"""

import importlib
import types

ADAPTERS = {
    'ppo': 'acme_launch.agents.ppo',
}


def get_adapter(agent: str) -> types.ModuleType:
  return importlib.import_module(ADAPTERS[agent])
