"""Acme's JAX R2D2: builder.py, networks.py (ours, sized by the config),
actor_core.py (its policy and actor core), adapter.py."""

from acme_launch.agents.r2d2.adapter import ADAPTER

__all__ = ['ADAPTER']
