"""Acme's JAX TD3: builder.py (delay and tau reaching the learner),
networks.py (and its policies), adapter.py."""

from acme_launch.agents.td3.adapter import ADAPTER

__all__ = ['ADAPTER']
