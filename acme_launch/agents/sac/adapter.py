"""Acme's JAX SAC (dm-acme 0.4.0) as an agent, from a `config.sac` section.

Its learner uses one device (dm-acme 0.4.0's learning.py has no pmap), its
actors fetch the learner's 'policy' variables on every update, its policy
returns actions alone, and a batched actor writes through one of the
builder's adders per environment: the Adapter's defaults.
"""

from acme_launch.agents.adapter import Adapter
from acme_launch.agents.sac import builder
from acme_launch.agents.sac import networks

ADAPTER = Adapter(
    make_builder=builder.make_builder,
    make_networks=networks.make_networks,
    make_policy=networks.make_policy,
    replay_tables=builder.replay_tables)
