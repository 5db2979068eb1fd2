"""Acme's JAX SAC: builder.py, networks.py (and its policies), adapter.py."""

from acme_launch.agents.sac.adapter import ADAPTER

__all__ = ['ADAPTER']
