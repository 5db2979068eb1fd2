"""Acme's JAX DQN: builder.py, networks.py, policy.py (epsilon-greedy, Ape-X's
epsilons), adapter.py."""

from acme_launch.agents.dqn.adapter import ADAPTER

__all__ = ['ADAPTER']
