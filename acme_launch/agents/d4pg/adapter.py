"""Acme's JAX D4PG (dm-acme 0.4.0) as an agent, from a `config.d4pg` section.

Its learner uses one device (dm-acme 0.4.0's learning.py has no pmap), its
actors fetch the learner's 'policy' variables on every update, its policy
returns actions alone, and a batched actor writes through one of the
builder's adders per environment: the Adapter's defaults. What its learner
serves its actors is its target policy, which a saved state names
`target_policy_params` (`saved_variables`).
"""

from acme_launch.agents.adapter import Adapter
from acme_launch.agents.d4pg import builder
from acme_launch.agents.d4pg import networks

ADAPTER = Adapter(
    make_builder=builder.make_builder,
    make_networks=networks.make_networks,
    make_policy=networks.make_policy,
    replay_tables=builder.replay_tables,
    saved_variables=builder.saved_variables)
