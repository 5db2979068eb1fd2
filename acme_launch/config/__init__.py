"""Flags and experiment configs: options, the config registry, the shared schema.

Nothing here imports acme, Launchpad, TensorFlow or JAX."""

from acme_launch.config.schema import base_config  # For config files.

__all__ = ['base_config']
