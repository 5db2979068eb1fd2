"""Acme's JAX DQN (dm-acme 0.4.0) from a `config.dqn` section.

Double Q-learning on n-step transitions from a prioritized Reverb table
(Acme's `PrioritizedDoubleQLearning` loss), a Q-network from
`config.network`, epsilon-greedy actors (batched ones too) and a (by default
greedy) evaluator. For discrete-action tasks such as CartPole-v1 and
MinAtar's games. With `dqn.apex_epsilons`, each actor's environments
explore with Ape-X's fixed epsilons (`actor_epsilons`) instead of one
`dqn.epsilon`. The Q-network is an MLP (`network.hidden_layers`) on the
flattened observation; on uint8 images (MinAtar's grids, Atari's frames) a
conv torso comes first when `network.conv_channels` names one
(agents/images.py), and the images are scaled to [0, 1] either way.
"""

from acme_launch.agents.adapter import Adapter
from acme_launch.agents.dqn import builder
from acme_launch.agents.dqn import networks
from acme_launch.agents.dqn import policy

# One learner device, actions alone from the policy, one of the builder's
# adders per environment: the defaults. Its actors fetch the learner's ''
# variables on every update, as Acme's DQN actor does.
ADAPTER = Adapter(
    make_builder=builder.make_builder,
    make_networks=networks.make_networks,
    make_policy=policy.make_policy,
    actor_variables='',
    replay_tables=builder.replay_tables,
    # Central inference: one policy, each actor's epsilons as data.
    actor_policy_inputs=policy.actor_policy_inputs)
