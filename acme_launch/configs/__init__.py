"""The shipped experiment configs: `--config=NAME` is `NAME.py` here.

Shipped inside the package so that an installed launcher finds them; the
checkout's top-level `configs` links here. See config/registry.py.
"""
