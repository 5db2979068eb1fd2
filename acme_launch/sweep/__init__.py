"""Sweeps: one program per point of a grid of config values, packed on this host
(plan.py checks a sweep and its slots, runner.py runs it)."""
