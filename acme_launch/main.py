"""The `acme-launch` command (and `python -m acme_launch`): what launch.py does.

The launcher itself computes nothing: its JAX and TF stay off any GPU, and
third-party notices are silenced before gym, TF, JAX or Reverb are imported.
Each node's process gets its own settings from the resource plan.
"""

import os


def main() -> None:
  os.environ['JAX_PLATFORMS'] = 'cpu'
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TF's dso-loader lines.
  from acme_launch import quiet
  quiet.quiet_third_party()
  from acme_launch import cli
  cli.run()
