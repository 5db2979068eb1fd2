"""Per-agent adapters: each turns a config into Acme's builder pieces.

An adapter module exposes three functions and nothing else is agent-specific:
  make_builder(config, learner_logger_fn, environment_spec)
      -> an Acme `ActorLearnerBuilder`; values a config derives from the
         environment (e.g. SAC's target entropy) are derived here, and bad
         agent fields raise `errors.LaunchError` (exit 2, nothing started)
  make_networks(config, environment_spec) -> the agent's networks
  make_policy(config, networks, environment_spec, evaluation)
      -> the policy `builder.make_actor` takes: the actors' behaviour policy,
         or the evaluator's when `evaluation` is true

Each adapter module also declares `LEARNER_DEVICES`: how many devices its
learner uses (1 for every agent here: dm-acme 0.4.0's learners do not pmap);
the resource planner gives the learner that many GPUs and leaves the rest
free.

and what its actors need, which program/build.py reads instead of guessing:
  POLICY_RETURNS_EXTRAS  bool: the policy returns (actions, extras) (PPO's
                         log-probs) rather than actions alone
  BATCHED_ADDER          bool: the builder has `make_batched_adder(
                         replay_client, environment_spec, num_envs)` (see
                         program/batched_adders.py) for actors with envs_per_actor > 1;
                         False: each environment gets `builder.make_adder()`
  ACTOR_VARIABLES        str: the learner variables its builder's actor
                         fetches ('policy', PPO's 'network', DQN's ''); see
                         make_variable_client below

Every function gets the same arguments whether it needs them or not, so
program/build.py calls every agent alike. Adding an agent: one module here, one
entry in ADAPTERS, and a config file in configs/ with a `config.<agent>`
section (and usually `config.network`).
"""

import importlib
import types

from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
from acme import core
from acme.jax import variable_utils
import ml_collections

ADAPTERS = {
    'ppo': 'acme_launch.agents.ppo',
    'sac': 'acme_launch.agents.sac',
    'td3': 'acme_launch.agents.td3',
    'd4pg': 'acme_launch.agents.d4pg',
    'dqn': 'acme_launch.agents.dqn',
}


# What every adapter module declares.
PROTOCOL = ('LEARNER_DEVICES', 'ACTOR_VARIABLES', 'POLICY_RETURNS_EXTRAS',
            'BATCHED_ADDER', 'make_builder', 'make_networks', 'make_policy')


def get_adapter(agent: str) -> types.ModuleType:
  adapter = importlib.import_module(ADAPTERS[agent])
  missing = [name for name in PROTOCOL if name not in vars(adapter)]
  if missing:  # A programming error in an adapter, not user input.
    raise TypeError(f'{adapter.__name__} does not declare {", ".join(missing)}')
  return adapter


def make_variable_client(adapter: types.ModuleType,
                         config: ml_collections.ConfigDict,
                         variable_source: core.VariableSource
                         ) -> variable_utils.VariableClient:
  """The client the agent's own actor makes, for the loops that step its
  policy themselves (batched actors, the final evaluation): its
  ACTOR_VARIABLES, fetched every `variable_update_period` updates of its
  config section where the agent's Acme config has that field (PPO), else
  on every update, as Acme's builders do."""
  period = config[config.agent].get('variable_update_period', 1)
  return variable_utils.VariableClient(
      variable_source, adapter.ACTOR_VARIABLES, device='cpu',
      update_period=period)
