"""Command line: options -> decision -> acted on -> supervisor.

`main` reads the flags once (acme_launch/config/options.py) and dispatches:
list configs, sweep (sweep/), dry run, or run and report. prepare.py makes
every check of user input before any process starts and decides, act.py
takes what a run needs (the fork server started between the decision's
two steps), driver.py runs it; here a bad input prints one line
(`acme-launch: error: ...`) and exits with code 2.
"""

import dataclasses
import functools
import importlib.util
import os
import sys
from typing import Any, Dict, List, Optional

from absl import app

from acme_launch import credentials
from acme_launch import describe
from acme_launch import errors
from acme_launch import prepare as prepare_lib
from acme_launch import safe_dirs
from acme_launch.config import options as options_lib
from acme_launch.config import registry
from acme_launch.plan import host as host_lib

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
  print(f'acme-launch: error: {credentials.mask(message)}', file=sys.stderr)
  sys.exit(EXIT_BAD_INPUT)


def parse_flags(argv: List[str]) -> List[str]:
  """absl flag parsing that reports any problem as one line and exit 2."""
  try:
    return options_lib.parse(argv)
  except errors.LaunchError as e:
    _fail(str(e))
  except SystemExit as e:
    # absl's --help, --helpfull, ... print usage and exit 1, which is this
    # launcher's "a node failed": asking for help succeeds.
    sys.exit(0 if e.code == 1 else e.code)


def _is_sweep_resume(options: options_lib.Options) -> bool:
  from acme_launch.sweep import record as sweep_record
  return bool(options.resume) and sweep_record.is_sweep_dir(options.resume)


def _sweep_options(options: options_lib.Options):
  """The sweep's own options (sweep.options.SweepOptions); LaunchError if bad."""
  from acme_launch.sweep.options import SweepOptions
  if options.debug_node:
    raise errors.LaunchError('--debug_node runs one node in this terminal: '
                             'not with --sweep, whose programs log to files')
  if options.launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        '--sweep runs local_mp programs on this host or ray programs on a Ray '
        f'cluster; not with --launch_type={options.launch_type}')
  if not options.dry_run and not all(
      importlib.util.find_spec(m) for m in ('ray', 'pyarrow', 'tensorboardX')):
    raise errors.LaunchError(
        '--sweep runs its points as Ray Tune trials, and this environment '
        'lacks Ray Tune (ray, pyarrow, tensorboardX; a --slim offline bundle '
        'leaves them out): install the lock with scripts/setup.sh')
  common = dict(max_concurrent=options.max_concurrent,
                progress_every=options.progress_every,
                dry_run=options.dry_run, gpu_inventory=options.gpu_inventory)
  if _is_sweep_resume(options):
    sweep_dir = os.path.abspath(options.resume)
    # Its sweep.json says which launchers to start, with which flags.
    safe_dirs.check(sweep_dir, f'--resume={options.resume}: sweep directory',
                    missing_ok=False)
    extra = options_lib.argv_without(
        list(options.argv[1:]),
        ('resume', 'max_concurrent', 'progress_every', 'dry_run',
         'tracking_uri'))
    if extra:
      raise errors.LaunchError(
          f'--resume={options.resume} finishes a sweep with the flags saved '
          f'in its sweep.json; only --max_concurrent, --progress_every, '
          f'--dry_run and --tracking_uri go with it, not {extra[0]}')
    return SweepOptions(
        sweep_dir=sweep_dir, resume=True,
        tracking_uri=_resumed_sweep_tracking_uri(options, sweep_dir), **common)
  if options.resume:
    raise errors.LaunchError(
        f'--sweep with --resume={options.resume}: that is not a sweep '
        'directory (no sweep.json); resume a sweep with --resume=SWEEP_DIR '
        'alone')
  if options.run_name:
    safe_dirs.check_name(options.run_name)
  run_name = options.run_name or prepare_lib.default_run_name(
      options.config_name, 'sweep')
  sweep_dir = os.path.abspath(os.path.join(options.workdir, run_name))
  safe_dirs.check(sweep_dir, 'sweep directory')
  return SweepOptions(
      sweep_dir=sweep_dir, resume=False, new_dir=not options.run_name,
      specs=options.sweep, samples=options.sweep_samples,
      sample_seed=options.sweep_seed, scheduler=options.sweep_scheduler,
      asha_grace_steps=options.asha_grace_steps,
      asha_reduction=options.asha_reduction,
      pbt_interval_steps=options.pbt_interval_steps,
      pbt_quantile=options.pbt_quantile, pbt_freeze=options.pbt_freeze,
      trial_retries=options.trial_retries,
      # Its points get --tracking_uri in their environment (_sweep_main).
      base_argv=tuple(options_lib.argv_without(
          list(options.argv[1:]),
          (*options_lib.SWEEP_ONLY_FLAGS, 'tracking_uri'))),
      tracking_uri=_sweep_tracking_uri(options),
      config_name=options.config_name, cwd=os.getcwd(), **common)


def _sweep_tracking_uri(options: options_lib.Options) -> str:
  """The MLflow URI a new sweep's points track to: --tracking_uri, else
  MLFLOW_TRACKING_URI with --tracking naming mlflow; '' for none."""
  from acme_launch import tracking as tracking_lib
  if 'mlflow' not in tracking_lib.parse_backends(options.tracking):
    if options.tracking_uri:
      raise errors.LaunchError(
          '--tracking_uri is MLflow\'s tracking URI: it goes with '
          '--tracking=mlflow')
    return ''
  return options.tracking_uri or os.environ.get('MLFLOW_TRACKING_URI', '')


def _resumed_sweep_tracking_uri(options: options_lib.Options,
                                sweep_dir: str) -> str:
  """The MLflow URI a resumed sweep's points track to: the one sweep.json
  recorded, its credentials given again (tracking.resumed_uri)."""
  from acme_launch import tracking as tracking_lib
  from acme_launch.sweep import record as sweep_record
  saved = sweep_record.read_record(sweep_dir).get('tracking_uri', '')
  if not saved:
    if options.tracking_uri:
      raise errors.LaunchError(
          f'--tracking_uri: the sweep in {sweep_dir} was started without an '
          'MLflow URI; its points keep the stores they have')
    return ''
  environ_uri = os.environ.get('MLFLOW_TRACKING_URI', '')
  uri = tracking_lib.resumed_uri(options.tracking_uri, environ_uri, saved,
                                 what='sweep')
  if credentials.mask(uri) != saved:
    raise errors.LaunchError(
        f'--tracking_uri={credentials.mask(uri)}: this sweep\'s points track '
        f'to {saved}; give that URI')
  return uri


def _check_sweep_point(argv: List[str],
                       host: Optional[host_lib.HostSlice] = None,
                       cluster=None):
  """A point's launch.py flags, checked as the CLI checks a command line, on
  `host` (a slot's view; this process's unless given) and, for ray, the
  cluster already connected (`cluster`: (address, hosts)): what it found
  (sweep.points.Checked); LaunchError if bad."""
  from acme_launch.sweep import points
  launch = prepare_lib.check_arguments(['launch.py', *argv], host, cluster)
  return points.Checked(
      launch.config, bool(launch.plan.gpu_usage),
      launch.cluster.demands if launch.cluster is not None else ())


def _sweep_cluster(sweep_options):
  """(address, hosts) of the Ray cluster a sweep's points run on, connected
  once, for --launch_type=ray among the points' flags (a resumed sweep's
  saved ones); else None."""
  from acme_launch.sweep import record as sweep_record
  base_argv = list(sweep_options.base_argv)
  if sweep_options.resume:
    base_argv = list(sweep_record.read_record(sweep_options.sweep_dir).get(
        'base_argv', []))
  point = options_lib.parse_again(['launch.py', *base_argv])
  if point.launch_type != 'ray':
    return None
  return prepare_lib.connect_cluster(point)


@dataclasses.dataclass(frozen=True)
class Sweep:
  """A sweep decided: its options (sweep.options.SweepOptions), record (what
  sweep.json will hold), points to run ((point, state) pairs) and slots."""
  options: Any
  record: Dict[str, Any]
  todo: List[Any]
  slots: List[Any]


def decide_sweep(options: options_lib.Options) -> Sweep:
  """--sweep, or --resume of a sweep directory, checked and planned
  (sweep/plan.py) before anything starts: every refusal is a LaunchError
  here. It sets this process's MLFLOW_TRACKING_URI to the sweep's (its
  points read it from there)."""
  from acme_launch.sweep import plan as sweep_plan
  sweep_options = _sweep_options(options)
  if sweep_options.tracking_uri:
    # To the points by their environment, never their command lines
    # (which `ps` shows anyone) nor sweep.json (which masks it).
    os.environ['MLFLOW_TRACKING_URI'] = sweep_options.tracking_uri
  cluster = _sweep_cluster(sweep_options)
  try:
    record, todo, slots = sweep_plan.prepare(
        sweep_options, functools.partial(_check_sweep_point, cluster=cluster),
        options.config, cluster)
  finally:
    if cluster is not None:  # Each point's launcher joins it on its own.
      import ray
      ray.shutdown()
  return Sweep(sweep_options, record, todo, slots)


def _sweep_main(options: options_lib.Options) -> int:
  """--sweep, or --resume of a sweep directory: decided here
  (decide_sweep), run by sweep/runner.py."""
  from acme_launch.sweep import plan as sweep_plan
  from acme_launch.sweep import runner as sweep_runner
  try:
    sweep = decide_sweep(options)
  except errors.LaunchError as e:
    _fail(str(e))
  if sweep.options.dry_run:
    print(sweep_plan.describe_dry_run(sweep.options, sweep.record, sweep.todo,
                                      sweep.slots))
    return 0
  try:
    return sweep_runner.run(sweep.options, sweep.record, sweep.todo,
                            sweep.slots)
  except errors.LaunchError as e:  # The sweep directory in use.
    _fail(str(e))


def main(argv: List[str]) -> int:
  """List configs, sweep, dry run, or run and report: flags read once here."""
  del argv  # What absl left: the program's name; options keep sys.argv.
  try:
    options = options_lib.read()
  except errors.LaunchError as e:  # A --resume folder changed since parsing.
    _fail(str(e))
  if options.list_configs:
    print(registry.listing())
    return 0
  # The run directory, logs, checkpoints and Launchpad's program file are
  # the user's alone; node processes inherit the mask.
  os.umask(0o077)
  if options.sweep or _is_sweep_resume(options):
    return _sweep_main(options)
  if options.launch_type in ('local_mt', 'test_mt') and not options.dry_run:
    from acme_launch.run import loopback
    loopback.reexec_preloaded()  # Its servers are threads of this process.
  try:
    early = prepare_lib.decide_early(options)
    if options.dry_run:
      print(describe.dry_run_text(prepare_lib.decide(early)))
      return 0
    from acme_launch import act
    taken = act.take(early)
  except errors.LaunchError as e:
    _fail(str(e))
  from acme_launch import driver
  try:
    return driver.run_and_report(taken)
  except errors.LaunchError as e:  # A node Ray could not place, a host
    _fail(str(e))                  # that cannot run nodes: nothing left.


def run() -> None:
  app.run(main, flags_parser=parse_flags)
