"""Acme's JAX IMPALA (dm-acme 0.4.0) from a `config.impala` section.

Importance-weighted actor-learner (Espeholt et al., 2018): actors play
their current policy and write sequences of `sequence_length` steps, with
the LSTM state at each step and the policy's logits (the behaviour policy),
into a Reverb queue; each sequence is sampled once (FIFO). The learner
unrolls its own policy over each sequence from the stored initial state and
corrects for the lag between the actors' policy and its own with V-trace;
its loss is the policy gradient plus `baseline_cost` x the value loss minus
`entropy_cost` x the entropy. The network is ours (networks.py), sized by
`config.network`, on the environment's observations as they are.

With `config.envs_per_actor` 1, actors are Acme's own recurrent actor (it
samples an action from the logits) and `SequenceAdder`, one environment
each. Two changes to Acme's actor, in `Builder.make_actor` (builder.py):
the policy step is jitted (Acme's applies the haiku network op by op) and
its action is a numpy value for the environment; and the actors fetch
parameters every `impala.variable_update_period` steps (Acme: every 1,000).
With `config.envs_per_actor` > 1, the batched recurrent actor
(program/recurrent_actor.py) steps `make_actor_core` (actor_core.py) for
all of them at once, one LSTM state per environment, into Acme's
SequenceAdder per environment: the same steps and extras as Acme's
IMPALAActor, with its key drawn per episode as Acme's GenericActor draws
it. The evaluator samples from the policy too, as the IMPALA paper
evaluates.

Its learner pmaps over every device its process has: it takes any number
(`config.resources.learner.num_devices`), each with `batch_size / N`
sequences a step, so that the queue drains at the same rate (builder.py).
"""

from acme_launch.agents.adapter import ANY_DEVICES, Adapter
from acme_launch.agents.impala import actor_core
from acme_launch.agents.impala import builder
from acme_launch.agents.impala import networks

# Its actors fetch the learner's 'network' variables every
# `impala.variable_update_period` updates. The policy keeps an LSTM state
# per environment: the final evaluation plays its episodes with the
# builder's own actor; batched actors step make_actor_core's core.
ADAPTER = Adapter(
    make_builder=builder.make_builder,
    make_networks=networks.make_networks,
    make_policy=actor_core.make_policy,
    learner_devices=ANY_DEVICES,
    actor_variables=builder.ACTOR_VARIABLES,
    variable_update_period=builder.variable_update_period,
    recurrent=True,
    make_actor_core=actor_core.make_actor_core,
    replay_tables=builder.replay_tables)
