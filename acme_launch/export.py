"""Takes a run's trained policy out: `python -m acme_launch.export`.

    python -m acme_launch.export RUN_DIR OUT_DIR [--checkpoint=ckpt-3]

OUT_DIR (new, or an empty folder) gets the newest learner checkpoint's (or
--checkpoint's) policy: params.npz, manifest.json, policy.jax_export (what
`acme_launch.policy.load(OUT_DIR)` runs with numpy and JAX only), a TF
SavedModel, an ONNX model and a README.md model card. A format that cannot
be made for the policy is named with the reason, in the output and the
card. Bad input (no run, no checkpoint, a damaged one, OUT_DIR not empty):
one line, exit 2, no OUT_DIR written. acme_launch/use/export.py does the
work.
"""

import os
import sys

# Like evaluate: JAX on the CPU, TF's device lines quiet; the user's wins.
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import argparse  # noqa: E402
import shlex  # noqa: E402
from typing import List, Optional  # noqa: E402

from acme_launch import errors  # noqa: E402


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog='python -m acme_launch.export',
                                   description=__doc__.splitlines()[0])
  parser.add_argument('run_dir')
  parser.add_argument('out_dir')
  parser.add_argument('--checkpoint', default='',
                      help='a learner checkpoint (ckpt-N or a path prefix); '
                      'default the newest')
  return parser


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  from acme_launch import quiet
  quiet.quiet_third_party()
  args = _parser().parse_args(argv)
  command = shlex.join(['python', '-m', 'acme_launch.export', *argv])
  try:
    from acme_launch.use import export
    export.export(args.run_dir, args.out_dir, args.checkpoint, command)
  except errors.LaunchError as e:
    print(f'acme-launch export: error: {e}', file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
