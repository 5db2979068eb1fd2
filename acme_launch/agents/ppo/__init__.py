"""Acme's JAX PPO: builder.py (a bounded queue, a batched adder, our fields),
networks.py (and its policy), normalization.py (observation statistics),
adapter.py."""

from acme_launch.agents.ppo.adapter import ADAPTER

__all__ = ['ADAPTER']
