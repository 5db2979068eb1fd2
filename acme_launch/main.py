"""The `acme-launch` command (and `python -m acme_launch`): what launch.py does.

The launcher itself computes nothing: its JAX and TF stay off any GPU, and
third-party notices are silenced before gym, TF, JAX or Reverb are imported.
Each node's process gets its own settings from the resource plan.
"""

import atexit
import os
import sys
import threading


def main() -> None:
  os.environ['JAX_PLATFORMS'] = 'cpu'
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TF's dso-loader lines.
  from acme_launch import quiet
  quiet.quiet_third_party()
  from acme_launch import cli
  try:
    cli.run()
  except SystemExit as e:
    _exit(e.code)
  _exit(0)


def _exit(code) -> None:
  """Ends the launcher as Python's exit would, less the interpreter's
  teardown of the modules it imported: with TensorFlow, JAX and Ray loaded
  that takes 2-4 s (measured on a 2-core VM), every launch, dry run and
  refused input, and saves nothing. Non-daemon threads are joined and the
  exit handlers run (W&B's, MLflow's, Ray's shutdown, the temp files
  libraries remove at exit), as they would be; then os._exit."""
  if code is None:
    status = 0
  elif isinstance(code, int):
    status = code
  else:  # sys.exit('message'): printed, status 1.
    print(code, file=sys.stderr)
    status = 1
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)
