"""Keeps third-party chatter out of the launcher's terminal and node logs.

The stack prints a page of notices that say nothing about the run: gym 0.25's
"unmaintained" banner (handled where gym is first imported:
compat.import_gym_quietly, run wherever acme is imported),
numpy/distutils/JAX DeprecationWarnings from TF, TensorBoard and Reverb, and
a dm-tree warning logged thousands of times per learner start.
`quiet_third_party()` runs first in the launcher (launch.py) and in every node
process (node/entry.py). Real errors and warnings of other kinds still show.
"""

import logging
import os
import warnings


class _DropKnownNoise(logging.Filter):
  """Drops a warning dm-tree logs thousands of times per learner start."""

  def filter(self, record: logging.LogRecord) -> bool:
    return 'check_types' not in record.getMessage()


def quiet_third_party() -> None:
  """Call before importing TF, Reverb or Launchpad."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TF's dso-loader lines.
  warnings.filterwarnings('ignore', category=DeprecationWarning)
  warnings.filterwarnings('ignore', category=FutureWarning)
  # JAX warns at every fork once it has started threads; the launcher forks
  # only through subprocess, whose child execs at once (no JAX code runs).
  warnings.filterwarnings('ignore', message=r'os\.fork\(\) was called',
                          category=RuntimeWarning)
  for logger in (logging.getLogger(), logging.getLogger('absl')):
    logger.addFilter(_DropKnownNoise())
