"""Keeps third-party chatter out of the launcher's terminal and node logs.

The stack prints a page of notices on import that say nothing about the run:
gym 0.25's "unmaintained" banner (printed to stderr at `import gym` from the
gym-notices package), numpy/distutils/JAX DeprecationWarnings from TF,
TensorBoard and Reverb, and a dm-tree warning logged thousands of times per
learner start. `quiet_third_party()` runs first in the launcher (launch.py)
and in every node process (node_entry.py), before any of them is imported.
Real errors and warnings of other kinds still show.
"""

import logging
import os
import warnings


class _DropKnownNoise(logging.Filter):
  """Drops a warning dm-tree logs thousands of times per learner start."""

  def filter(self, record: logging.LogRecord) -> bool:
    return 'check_types' not in record.getMessage()


def _silence_gym_banner() -> None:
  # gym prints gym_notices.notices[its version] at import; the README says
  # why gym 0.25 is still here (published v4 numbers), so the banner goes.
  try:
    from gym_notices import notices  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  notices.notices.clear()


def quiet_third_party() -> None:
  """Call before importing gym, TF, JAX or Reverb."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TF's dso-loader lines.
  _silence_gym_banner()
  # gym's logger puts a 'once' DeprecationWarning filter first when imported:
  # import it before ours so ours stays in front.
  try:
    import gym.logger  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    pass
  warnings.filterwarnings('ignore', category=DeprecationWarning)
  warnings.filterwarnings('ignore', category=FutureWarning)
  for logger in (logging.getLogger(), logging.getLogger('absl')):
    logger.addFilter(_DropKnownNoise())
