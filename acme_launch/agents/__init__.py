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

A builder may also have `make_batched_adder(replay_client, environment_spec,
num_envs)` (see batched_adders.py) for actors with `envs_per_actor` > 1;
otherwise each of their environments gets `builder.make_adder(...)`.

Every function gets the same arguments whether it needs them or not, so
program.py calls every agent alike. Adding an agent: one module here, one
entry in ADAPTERS, and a config file in configs/ with a `config.<agent>`
section (and usually `config.network`).
"""

import importlib
import types

ADAPTERS = {
    'ppo': 'acme_launch.agents.ppo',
    'sac': 'acme_launch.agents.sac',
    'td3': 'acme_launch.agents.td3',
    'd4pg': 'acme_launch.agents.d4pg',
    'dqn': 'acme_launch.agents.dqn',
}


def get_adapter(agent: str) -> types.ModuleType:
  return importlib.import_module(ADAPTERS[agent])
