"""acme-launch: run distributed Acme agents on your own machines."""

import os as _os

# The folder that holds this package: node processes' PYTHONPATH and cwd.
ROOT = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))

# dm-acme 0.4.0 needs JAX aliases before it is first imported: see compat.py.
from acme_launch import compat as _compat  # pylint: disable=unused-import

# gym 0.25 prints a deprecation banner to stderr when first imported, and
# acme's wrappers and envpool import it: import it here, first, quietly.
_compat.import_gym_quietly()
