"""Acme's JAX PPO (dm-acme 0.4.0) as an agent, from a `config.ppo` section.

Its learner uses one device (dm-acme 0.4.0's learning.py has no pmap, so the
resource planner gives it one GPU, no more). Its actors fetch the learner's
'network' variables as often as the PPOConfig says, its policy returns
(actions, extras) (the log-probs its learner needs; {} when evaluating), and
a batched actor writes every environment's sequences through the builder's
make_batched_adder.
"""

from acme_launch.agents.adapter import Adapter
from acme_launch.agents.ppo import builder
from acme_launch.agents.ppo import networks

ADAPTER = Adapter(
    make_builder=builder.make_builder,
    make_networks=networks.make_networks,
    make_policy=networks.make_policy,
    learner_devices=1,
    actor_variables='network',
    variable_update_period=builder.variable_update_period,
    policy_returns_extras=True,
    batched_adder=True,
    replay_tables=builder.replay_tables)
