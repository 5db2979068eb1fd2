"""Plays a run's trained policy again: `python -m acme_launch.evaluate`.

    python -m acme_launch.evaluate RUN_DIR [--episodes=N] [--checkpoint=ckpt-3]
        [--sample] [--seed=S] [--env_name=TASK] [--config.FIELD=VALUE ...]
        [--video [--video_episodes=K]]

N episodes (the config's final_eval_episodes unless --episodes) with the
policy of the run's newest learner checkpoint (or --checkpoint, a name in
RUN_DIR/checkpoints/learner or a path), in this process: no Launchpad
program, Reverb server or port. The deterministic policy, the evaluator's,
unless --sample (the actors' sampling one). The final evaluation's seeds
unless --seed: with the checkpoint its parameters were saved in, its
episodes again, return for return. --env_name and --config.FIELD= evaluate
on another task or setting whose observations and actions match the run's.
One line per episode (return, length), then the summary in a run's words;
the same figures go to a new JSON file in RUN_DIR/evaluations/. A run still
training can be evaluated: its checkpoints are read, never changed.

Bad input (no run, no checkpoint yet, a checkpoint of another agent or
size, a task whose spaces differ, damaged files): one line, exit 2, nothing
written. acme_launch/use/evaluate.py does the work.
"""

import os
import sys

# Like the launcher: JAX on the CPU (the evaluator's policy calls run
# there), TF's device lines quiet; the user's settings win.
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import argparse  # noqa: E402
from typing import List, Optional  # noqa: E402

from acme_launch import errors  # noqa: E402


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog='python -m acme_launch.evaluate',
      description=__doc__.splitlines()[0],
      epilog='--config.FIELD=VALUE overrides a field of the run\'s config')
  parser.add_argument('run_dir')
  parser.add_argument('--episodes', type=int, default=0,
                      help="episodes to play (default: the config's "
                      'final_eval_episodes)')
  parser.add_argument('--checkpoint', default='',
                      help='a learner checkpoint (ckpt-N or a path prefix); '
                      'default the newest')
  parser.add_argument('--sample', action='store_true',
                      help='the acting (sampling) policy, not the '
                      "evaluator's deterministic one")
  parser.add_argument('--seed', type=int, default=None,
                      help="other seeds (default: the final evaluation's)")
  parser.add_argument('--env_name', default='',
                      help='another task with the same spaces')
  parser.add_argument('--video', action='store_true',
                      help='film the episodes (mp4, under evaluations/)')
  parser.add_argument('--video_episodes', type=int, default=0,
                      help='film only the first K episodes')
  return parser


def read_config(run_dir: str, overrides: List[str], env_name: str):
  """The run's saved config with --config.FIELD=VALUE overrides applied by
  ml_collections, as the launcher applies them (config/saved.py); None
  when there are none."""
  if not overrides and not env_name:
    return None
  from absl import flags
  from ml_collections import config_flags
  from acme_launch.config import saved
  from acme_launch.use import restore
  restore.read_run(run_dir)  # Not a run: its own line first.
  # The overrides are read from `sys_argv`, as the launcher's are.
  argv = ['evaluate', f'--config={os.path.abspath(saved.__file__)}:{run_dir}',
          *overrides]
  values = flags.FlagValues()
  config_flags.DEFINE_config_file('config', None, flag_values=values,
                                  sys_argv=argv)
  try:
    values(argv)
  except (flags.Error, ValueError, KeyError, AttributeError) as e:
    raise errors.LaunchError(' '.join(str(e).split())[:300]) from None
  config = values.config
  if env_name:
    config.env_name = env_name
  return config


def request_of(argv: List[str]):
  """The command line as a use.evaluate.Request (LaunchError if bad)."""
  from acme_launch.use import evaluate
  args, rest = _parser().parse_known_args(argv)
  unknown = [a for a in rest if not a.startswith('--config.')]
  if unknown:
    raise errors.LaunchError(f'unknown arguments: {" ".join(unknown)}')
  return evaluate.Request(
      run_dir=args.run_dir, episodes=args.episodes, checkpoint=args.checkpoint,
      sample=args.sample, seed=args.seed,
      config=read_config(args.run_dir, rest, args.env_name),
      video=args.video, video_episodes=args.video_episodes)


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  from acme_launch import quiet
  quiet.quiet_third_party()
  try:
    request = request_of(argv)
    if request.video:
      from acme_launch.envs import video
      video.choose_gl()  # Before MuJoCo is imported.
    from acme_launch.use import evaluate
    evaluate.evaluate(request)
  except errors.LaunchError as e:
    print(f'acme-launch evaluate: error: {e}', file=sys.stderr)
    return 2
  return 0


if __name__ == '__main__':
  sys.exit(main())
