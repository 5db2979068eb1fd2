"""Acme's JAX R2D2 (dm-acme 0.4.0) from a `config.r2d2` section.

Recurrent replay distributed DQN (Kapturowski et al., 2019): actors write
overlapping sequences (`burn_in_length + trace_length + 1` steps, a new one
every `sequence_period` steps) with the LSTM state at their start into a
prioritized Reverb table; the learner burns in the state on the first
`burn_in_length` steps and trains on n-step double-Q targets with the
signed-hyperbolic value transform. The network is ours (networks.py), sized
by `config.network`, on the environment's observations as they are.

Exploration is Acme's: each actor draws its epsilon for each episode from
the Ape-X set `0.4 ** logspace(1, 8, num_epsilons)`, so the actors of a
program cover that range; the evaluator uses `evaluation_epsilon`.

Actors are Acme's own recurrent actor and adder with one environment each;
with `config.envs_per_actor` > 1, the batched recurrent actor
(program/recurrent_actor.py) steps Acme's R2D2 actor core (`make_actor_core`,
actor_core.py) for all of them at once, one LSTM state and one epsilon per
environment, into Acme's SequenceAdder per environment.

Its learner pmaps over every device its process has: it takes any number
(`config.resources.learner.num_devices`), each with `batch_size / N`
sequences a step (builder.py).
"""

from acme_launch.agents.adapter import ANY_DEVICES, Adapter
from acme_launch.agents.r2d2 import actor_core
from acme_launch.agents.r2d2 import builder
from acme_launch.agents.r2d2 import networks

# The learner's get_variables ignores the name; Acme's R2D2 actor asks for
# 'actor_variables', and so do the loops that step the policy themselves,
# every R2D2Config.variable_update_period updates. The policy keeps an LSTM
# state per environment: the final evaluation plays its episodes with the
# builder's own actor; batched actors step make_actor_core's core.
ADAPTER = Adapter(
    make_builder=builder.make_builder,
    make_networks=networks.make_networks,
    make_policy=actor_core.make_policy,
    learner_devices=ANY_DEVICES,
    actor_variables='actor_variables',
    variable_update_period=builder.variable_update_period,
    recurrent=True,
    make_actor_core=actor_core.make_actor_core,
    replay_tables=builder.replay_tables)
