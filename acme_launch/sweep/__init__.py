"""Sweeps: one program per point of a grid of config values, packed on this host."""
