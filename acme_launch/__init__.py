"""acme-launch: run distributed Acme agents on your own machines.

Importing the package does nothing else: no JAX, gym, acme, Launchpad or TF.
The JAX aliases dm-acme 0.4.0 needs (compat.py) are applied by every module
that imports acme, and first thing in every node process (node/entry.py).
"""

from acme_launch.paths import ROOT

__all__ = ['ROOT', 'dry_run', 'evaluate_run', 'launch']


def __getattr__(name):
  """`acme_launch.launch`, `dry_run` and `evaluate_run` (api.py), imported
  on first use so that `import acme_launch` stays free of side effects."""
  if name in ('launch', 'dry_run', 'evaluate_run'):
    from acme_launch import api
    return getattr(api, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
