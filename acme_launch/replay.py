"""A population member's schedule, replayed as one program from scratch:
`python -m acme_launch.replay SWEEP_DIR [--member=NAME]`.

Population-based training (--sweep_scheduler=pbt, docs/sweeps.md) does not
find one setting but a schedule of them: the values a member's learner was
trained with, segment by segment, through the members it copied. This runs
that schedule as one program (the best member's, or --member's): a segment
per change of values, its run directory resumed at each with the next
values (`--resume` and `--config.FIELD=VALUE`), the flags of the sweep and
the member's own seed otherwise. Its run directory is
SWEEP_DIR/replays/MEMBER unless --workdir/--run_name say otherwise.
"""

import argparse
import os
import subprocess
import sys
from typing import List, Tuple

from acme_launch import errors
from acme_launch import layout
from acme_launch import paths
from acme_launch.sweep import population
from acme_launch.sweep import record as sweep_record


def _member(sweep_dir: str, record, asked: str) -> str:
  names = [p['name'] for p in record['points']]
  if asked:
    if asked not in names:
      raise errors.LaunchError(
          f'--member={asked}: not a member of {sweep_dir} ({", ".join(names)})')
    return asked
  table = sweep_record.summarize(sweep_dir, record)
  best = table.get('population', {}).get('best')
  if not best:
    raise errors.LaunchError(
        f'{sweep_dir}: no member reached its budget yet; name one with '
        '--member')
  return best


def plan(sweep_dir: str, asked: str, workdir: str, run_name: str
         ) -> Tuple[str, List[Tuple[int, dict]], List[List[str]], str]:
  """(member, its schedule, the launch.py flags of each segment, the run
  directory); LaunchError if the directory is not a population's."""
  record = sweep_record.read_record(sweep_dir)
  if not population.is_population(record):
    raise errors.LaunchError(
        f'{sweep_dir} is not a population (--sweep_scheduler=pbt): its '
        'points ran with fixed values; run one with launch.py')
  member = _member(sweep_dir, record, asked)
  steps = population.schedule(record, member)
  if not steps:
    raise errors.LaunchError(f'{member}: no segment of it was recorded')
  entry = next(p for p in record['points'] if p['name'] == member)
  space = record['scheduler']['space']
  base = population.member_flags(record['base_argv'], entry['args'],
                                 list(entry['fields']), space)
  run_name = run_name or member
  run_dir = os.path.join(workdir, run_name)
  if os.path.exists(run_dir):
    raise errors.LaunchError(
        f'{run_dir} exists: a replay starts from scratch; give another '
        '--run_name')
  segments = []
  for i, (end, values) in enumerate(steps):
    where = ([f'--workdir={workdir}', f'--run_name={run_name}'] if i == 0
             else [f'--resume={run_dir}'])
    segments.append([*base, *population.flags(values),
                     f'--config.max_actor_steps={end}', *where])
  return member, steps, segments, run_dir


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(
      prog='python -m acme_launch.replay',
      description=__doc__.splitlines()[0])
  parser.add_argument('sweep_dir', help="a population's sweep directory")
  parser.add_argument('--member', default='', help='the member whose '
                      'schedule to replay (default: the best)')
  parser.add_argument('--workdir', default='', help='default '
                      'SWEEP_DIR/replays')
  parser.add_argument('--run_name', default='', help='default: the member')
  parser.add_argument('--dry_run', action='store_true', help='print the '
                      'schedule and the commands; start nothing')
  args = parser.parse_args(argv)
  sweep_dir = os.path.abspath(args.sweep_dir)
  try:
    member, steps, segments, run_dir = plan(
        sweep_dir, args.member,
        os.path.abspath(args.workdir or os.path.join(sweep_dir, 'replays')),
        args.run_name)
  except errors.LaunchError as e:
    print(f'acme-launch replay: error: {e}', file=sys.stderr)
    return 2
  print(f'acme-launch replay: the schedule of {member}:')
  start = 0
  for end, values in steps:
    print(f'  actor steps {start:,} to {end:,}: '
          f'{", ".join(f"{f}={population.value_text(v)}" for f, v in values.items())}')
    start = end
  for flags in segments:
    command = [sys.executable, '-m', 'acme_launch', *flags]
    if args.dry_run:
      print(' '.join(command))
      continue
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (paths.ROOT, env.get('PYTHONPATH', '')) if p)
    try:
      code = subprocess.run(command, env=env, check=False).returncode
    except KeyboardInterrupt:  # The child got the terminal's Ctrl-C too.
      return 130
    if code != 0:
      return code
  if args.dry_run:
    print('dry run: nothing was started.')
    return 0
  summary = layout.read_json(layout.summary_path(run_dir), {}) or {}
  final = sweep_record.final_return(summary)
  print(f'acme-launch replay: {member}\'s schedule, replayed: final return '
        f'{"-" if final is None else f"{final:.1f}"}; run directory {run_dir}')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
