"""Acme's JAX D4PG: builder.py, networks.py (and its policies), adapter.py."""

from acme_launch.agents.d4pg.adapter import ADAPTER

__all__ = ['ADAPTER']
