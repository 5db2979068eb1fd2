"""Acme's JAX IMPALA: config.py (its fields, checked), builder.py,
networks.py (ours, sized by the config), actor_core.py (its policy and
actor core), adapter.py."""

from acme_launch.agents.impala.adapter import ADAPTER

__all__ = ['ADAPTER']
