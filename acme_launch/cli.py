"""Command line: options -> config -> resource plan -> program -> supervisor.

`main` reads the flags once (acme_launch/config/options.py) and dispatches: list
configs, sweep, dry run, or run and report. Every check of user input
happens before any process starts; a bad input prints one line
(`acme-launch: error: ...`) and exits with code 2.
"""

import collections
import dataclasses
import datetime
import importlib.metadata
import math
import os
import sys
from typing import Any, List, Optional, Tuple

from absl import app
import ml_collections

from acme_launch import compilation_cache
from acme_launch import errors
from acme_launch.plan import host as host_lib
from acme_launch.config import schema as experiment_config
from acme_launch.config import options as options_lib
from acme_launch.config import registry
from acme_launch.plan import topology
from acme_launch.run import rundir

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
  print(f'acme-launch: error: {message}', file=sys.stderr)
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


def _package_versions() -> dict:
  return {d.metadata['Name']: d.version
          for d in importlib.metadata.distributions()}


def _write_run_config(run_dir, config_name, config, built, plan, seeds,
                      launch_type, argv, python_path) -> None:
  from acme_launch import layout  # pylint: disable=g-import-not-at-top
  layout.write_json_atomic(layout.config_path(run_dir), {
      'config_name': config_name,
      'config': config.to_dict(),
      'identity': built.identity,
      'launch_type': launch_type,
      'argv': list(argv),
      'python_path': list(python_path),
      'node_seeds': seeds,
      'resource_plan': [
          {'node': p.node, 'group': p.group, 'label': p.label,
           'gpus': list(p.gpus), 'cores': list(p.cores), 'env': dict(p.env)}
          for p in plan.placements],
      'python': sys.version,
      'packages': _package_versions(),
  })


def _run_dir_path(options: options_lib.Options, config_name: str) -> str:
  if options.resume:
    return os.path.abspath(options.resume)
  run_name = options.run_name or (
      f'{config_name}_{datetime.datetime.now():%Y%m%d-%H%M%S}')
  return os.path.abspath(os.path.join(options.workdir, run_name))


def _load_config(options: options_lib.Options):
  """(config, its name, the folders of the user's code): the --config flag's,
  or with --resume alone the ones saved in the run directory."""
  from acme_launch import layout  # pylint: disable=g-import-not-at-top
  if options.config is not None:
    return options.config, options.config_name, options.python_path
  saved = layout.read_json(layout.config_path(os.path.abspath(options.resume)))
  if saved is None:
    raise errors.LaunchError(
        f'--resume={options.resume}: no run directory with a config.json there')
  config = ml_collections.ConfigDict(saved['config'])
  experiment_config.add_missing_fields(config)
  return (config, saved.get('config_name', 'resumed'),
          tuple(options.python_path or saved.get('python_path', ())))


def _importable(python_path: Tuple[str, ...]) -> None:
  """The user's code folders first on this launcher's own path too: it
  loads their adapter and environment to check and plan them."""
  for folder in reversed(python_path):
    if folder not in sys.path:
      sys.path.insert(0, folder)


def _describe_nodes(built, launch_type: str) -> str:
  process = {'local_mp': 'own process', 'ray': 'own process on a Ray host'
             }.get(launch_type, 'thread of launcher')
  lines = [f'{"node":<14} {"group label":<16} process']
  for label, names in built.nodes_by_label.items():
    for name in names:
      lines.append(f'{name:<14} {label:<16} {process}')
  return '\n'.join(lines)


@dataclasses.dataclass
class Launch:
  """What the CLI decided before starting anything (see prepare_launch)."""
  config: ml_collections.ConfigDict
  config_name: str
  launch_type: str
  plan: Any                  # resources.ResourcePlan
  built: Any                 # program.BuiltProgram
  run_dir: str
  resume: Any = None         # resume.ResumeState; None on a dry run
  preload: str = ''          # The loopback shim, preloaded into node processes.
  exposed_reason: str = ''   # Why not, with --allow_exposed_listeners.
  notes: List[str] = dataclasses.field(default_factory=list)  # Lines to show.
  debug_node: str = ''       # Runs in the foreground of this terminal.
  pdb: bool = False          # Post-mortem debugger on a node's exception.
  cluster: Any = None        # ray_cluster.Cluster for --launch_type=ray.
  # Folders of the user's code, first on the path of every node process.
  python_path: Tuple[str, ...] = ()
  # JAX's persistent compilation cache for the nodes ('': none).
  compilation_cache: str = ''


def _check_debugging(launch_type: str, debug_node: str, pdb: bool,
                     node_names: List[str]) -> None:
  """--debug_node and --pdb: a node of this program, a launch type for them."""
  names = ', '.join(node_names)
  if debug_node and launch_type != 'local_mp':
    raise errors.LaunchError(
        f'--debug_node needs --launch_type=local_mp (under {launch_type} every '
        'node is a thread of this process: use --pdb, and breakpoint() works '
        'as is)')
  if debug_node and debug_node not in node_names:
    raise errors.LaunchError(
        f'--debug_node={debug_node} names no node of this program; its nodes: '
        f'{names}')
  if pdb and launch_type == 'local_mp' and not debug_node:
    raise errors.LaunchError(
        '--pdb under local_mp needs --debug_node=NODE, the node to debug in '
        f'this terminal; one of: {names}')


def _loopback(launch_type: str, allow_exposed: bool) -> Tuple[str, str]:
  """(shim to preload, '') or, with --allow_exposed_listeners, ('', why not)."""
  from acme_launch.run import loopback  # pylint: disable=g-import-not-at-top
  try:
    path = loopback.ensure()
    if launch_type != 'local_mp' and not loopback.active_in_this_process():
      raise loopback.Unavailable(
          'the loopback shim could not be preloaded into this launcher, '
          f'where {launch_type} runs every server')
  except loopback.Unavailable as e:
    if loopback.only_loopback_interfaces():
      return '', ''  # Nothing can reach this network namespace from outside.
    if not allow_exposed:
      raise errors.LaunchError(
          f'{e}; without it Reverb and Courier servers listen on every '
          'network interface. Run scripts/setup.sh (it needs a C compiler), '
          'or pass --allow_exposed_listeners to run anyway') from None
    return '', str(e)
  return path, ''


def connect_cluster(options: options_lib.Options) -> Tuple[str, Any]:
  """--launch_type=ray: (address, hosts) of the cluster; LaunchError if not.

  Imports only ray: main() calls it before the heavy imports, so that an
  unreachable address is reported within seconds.
  """
  from acme_launch.run.ray import cluster as ray_cluster  # pylint: disable=g-import-not-at-top
  address = ray_cluster.resolve_address(options.ray_address)
  hosts = ray_cluster.connect(address)
  ray_cluster.check_addresses(hosts, options.allow_public_cluster_address)
  return address, hosts


def prepare_launch(options: options_lib.Options, connected_cluster=None,
                   host: Optional[host_lib.HostSlice] = None) -> Launch:
  """Every check and decision before any process starts.

  Loads and validates the config, plans resources and builds the program
  within `host` (this process's cores and GPUs unless given: a sweep gives
  a slot's), for --launch_type=ray also connects to the cluster unless given
  `connected_cluster` from connect_cluster(), and checks it can hold it;
  unless `options.dry_run`, also checks the loopback shim and takes the run directory
  (created private, locked, checkpoints read for resume). Raises LaunchError
  (exit 2, one line) for every bad input; nothing is started.
  """
  # Heavy imports (acme, launchpad, TF) only once the input parsed.
  from acme_launch import agents  # pylint: disable=g-import-not-at-top
  from acme_launch.run import resume as resume_lib  # pylint: disable=g-import-not-at-top
  from acme_launch.run import disk_space  # pylint: disable=g-import-not-at-top
  from acme_launch.program import build as program_lib  # pylint: disable=g-import-not-at-top
  from acme_launch.plan import gpu_inventory  # pylint: disable=g-import-not-at-top
  from acme_launch.plan import resources  # pylint: disable=g-import-not-at-top
  from acme_launch import layout  # pylint: disable=g-import-not-at-top

  launch_type, dry_run = options.launch_type, options.dry_run
  host = host or host_lib.HostSlice.of_this_process()
  config, config_name, python_path = _load_config(options)
  _importable(python_path)
  experiment_config.validate(config)
  if launch_type == 'ray':
    from acme_launch.run.ray import cluster as ray_cluster  # pylint: disable=g-import-not-at-top
    address, hosts = connected_cluster or connect_cluster(options)
  inventory = resources.read_inventory(options.gpu_inventory,
                                       host.visible_gpus)
  learner_devices = agents.load(config.agent).learner_devices
  # Only local_mp starts a process per node on this host: pin them within
  # the cores this launcher may use (a sweep or `taskset` gives it a slice).
  host_cores = list(host.cores) if launch_type == 'local_mp' else None
  plan = resources.plan_resources(program_lib.node_list(config),
                                  config.resources, inventory, learner_devices,
                                  host_cores)
  notes = []
  if plan.gpu_usage and launch_type != 'ray':
    # GPU nodes need a jaxlib that opens them (setup installs the CPU build
    # unless it finds a GPU). On a Ray cluster the GPU hosts are elsewhere.
    opens, why = gpu_inventory.jax_opens_gpus()
    if not opens:
      if dry_run:
        notes.append('note: this machine\'s jaxlib cannot open these GPUs '
                     f'({why}); a run here would plan every node on the CPU')
      else:
        notes.append(
            f'warning: the installed jaxlib cannot open the GPUs ({why}); '
            'every node runs on the CPU. For the GPUs: '
            'ACME_LAUNCH_JAX=cuda12 scripts/setup.sh')
        plan = resources.plan_resources(program_lib.node_list(config),
                                        config.resources, (), learner_devices,
                                        host_cores)
  run_dir = _run_dir_path(options, config_name)
  built = program_lib.make_program(config, plan, run_dir)
  node_names = [n for names in built.nodes_by_label.values() for n in names]
  _check_debugging(launch_type, options.debug_node, options.pdb, node_names)
  if options.auto_resume and launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        '--auto_resume works with --launch_type=local_mp or ray only (under '
        'local_mt and test_mt a failure ends this process)')
  launch = Launch(config, config_name, launch_type, plan, built, run_dir,
                  debug_node=options.debug_node, pdb=options.pdb, notes=notes,
                  python_path=python_path)
  if launch_type == 'ray':
    node_demands = ray_cluster.demands(
        [(node, plan.placement(built.placement_node(node)))
         for names in built.nodes_by_label.values() for node in names])
    launch.cluster = ray_cluster.Cluster(
        address, hosts, ray_cluster.fit(node_demands, hosts), node_demands)
  if dry_run:
    return launch
  if launch_type != 'ray':  # On a cluster, each host checks its own shim.
    launch.preload, launch.exposed_reason = _loopback(
        launch_type, options.allow_exposed_listeners)
  launch.compilation_cache = _compilation_cache(
      options.compilation_cache, launch_type, notes)
  rundir.check_resumable(run_dir, built.identity)
  rundir.prepare(run_dir)
  try:
    os.chmod(run_dir, 0o700)  # Also one an older version left open to others.
  except OSError:
    pass  # Not ours to change; writable, as prepare() checked.
  rundir.lock(run_dir)
  launch.resume = resume_lib.verify_for_resume(run_dir)
  short = disk_space.shortage(run_dir, int(options.disk_guard_mb * 2**20))
  if short:
    raise errors.LaunchError(short)
  return launch


def _compilation_cache(folder: str, launch_type: str, notes: List[str]) -> str:
  """The cache folder to hand the nodes ('': none), from --compilation_cache.

  local_mp checks the folder here, so that a problem with it is one warning
  line and the run goes on without it. A Ray node checks its own host's
  ('default': the default folder there).
  """
  if folder == 'none' or launch_type not in ('local_mp', 'ray'):
    return ''
  if launch_type == 'ray':
    return folder or 'default'
  usable, why = compilation_cache.usable(
      folder or compilation_cache.default_dir())
  if why:
    notes.append(f'warning: no compilation cache ({why}); every node '
                 'compiles its functions as usual')
  return usable


def check_arguments(argv: List[str],
                    host: Optional[host_lib.HostSlice] = None
                    ) -> Optional[Launch]:
  """`launch.py ARGV --dry_run`'s decisions, in this process, repeatably.

  Parses `argv` (a full command line, argv[0] included) exactly as the CLI
  does and prepares the launch as --dry_run does, as a launcher on `host`
  would (its cores, GPUs, and folder for relative paths; this process's
  unless given): LaunchError is what the CLI reports with exit 2; a return
  (None for --list_configs) is exit 0. The sweep checks each of its points
  with it.
  """
  if host is not None:
    argv = options_lib.paths_from(argv, host.cwd)
  options = options_lib.parse_again(argv)
  if options.list_configs:
    return None
  return prepare_launch(dataclasses.replace(options, dry_run=True), host=host)


def _is_sweep_resume(options: options_lib.Options) -> bool:
  from acme_launch.sweep import record as sweep_record  # pylint: disable=g-import-not-at-top
  return bool(options.resume) and sweep_record.is_sweep_dir(options.resume)


def _sweep_options(options: options_lib.Options):
  """The sweep's own options (sweep.SweepOptions); LaunchError if bad."""
  from acme_launch.sweep import runner as sweep  # pylint: disable=g-import-not-at-top
  if options.debug_node:
    raise errors.LaunchError('--debug_node runs one node in this terminal: '
                             'not with --sweep, whose programs log to files')
  if options.launch_type != 'local_mp':
    raise errors.LaunchError(
        f'--sweep packs local_mp programs on this host; not with '
        f'--launch_type={options.launch_type}')
  common = dict(max_concurrent=options.max_concurrent,
                progress_every=options.progress_every,
                dry_run=options.dry_run, gpu_inventory=options.gpu_inventory)
  if _is_sweep_resume(options):
    extra = options_lib.argv_without(
        list(options.argv[1:]),
        ('resume', 'max_concurrent', 'progress_every', 'dry_run'))
    if extra:
      raise errors.LaunchError(
          f'--resume={options.resume} finishes a sweep with the flags saved '
          f'in its sweep.json; only --max_concurrent, --progress_every and '
          f'--dry_run go with it, not {extra[0]}')
    return sweep.SweepOptions(
        sweep_dir=os.path.abspath(options.resume), resume=True, **common)
  if options.resume:
    raise errors.LaunchError(
        f'--sweep with --resume={options.resume}: that is not a sweep '
        'directory (no sweep.json); resume a sweep with --resume=SWEEP_DIR '
        'alone')
  run_name = options.run_name or (
      f'{options.config_name}_sweep_{datetime.datetime.now():%Y%m%d-%H%M%S}')
  return sweep.SweepOptions(
      sweep_dir=os.path.abspath(os.path.join(options.workdir, run_name)),
      resume=False, specs=options.sweep,
      base_argv=tuple(options_lib.argv_without(
          list(options.argv[1:]), options_lib.SWEEP_ONLY_FLAGS)),
      config_name=options.config_name, cwd=os.getcwd(), **common)


def _check_sweep_point(argv: List[str],
                       host: Optional[host_lib.HostSlice] = None):
  """A point's launch.py flags, checked as the CLI checks a command line, on
  `host` (a slot's view; this process's unless given): (its resolved config,
  whether its plan uses GPUs); LaunchError if bad."""
  launch = check_arguments(['launch.py', *argv], host)
  return launch.config, bool(launch.plan.gpu_usage)


def _sweep_main(options: options_lib.Options) -> int:
  """--sweep, or --resume of a sweep directory: see acme_launch/sweep/runner.py."""
  from acme_launch.sweep import runner as sweep  # pylint: disable=g-import-not-at-top
  try:
    sweep_options = _sweep_options(options)
    record, todo, slots = sweep.prepare(sweep_options, _check_sweep_point,
                                        options.config)
  except errors.LaunchError as e:
    _fail(str(e))
  if sweep_options.dry_run:
    print(sweep.describe_dry_run(sweep_options, record, todo, slots))
    return 0
  try:
    return sweep.run(sweep_options, record, todo, slots)
  except errors.LaunchError as e:  # The sweep directory in use.
    _fail(str(e))


def prepare(options: options_lib.Options) -> Launch:
  """prepare_launch, after what must come first: local_mt's re-exec with the
  loopback shim, and a Ray address checked before the heavy imports (an
  unreachable one is reported within seconds)."""
  if options.max_concurrent:
    raise errors.LaunchError(
        '--max_concurrent goes with --sweep (programs of a sweep at once)')
  if options.launch_type in ('local_mt', 'test_mt') and not options.dry_run:
    from acme_launch.run import loopback  # pylint: disable=g-import-not-at-top
    loopback.reexec_preloaded()  # Its servers are threads of this process.
  connected_cluster = None
  if options.launch_type == 'ray':
    connected_cluster = connect_cluster(options)
  return prepare_launch(options, connected_cluster)


def print_dry_run(launch: Launch) -> None:
  from acme_launch.plan import table  # pylint: disable=g-import-not-at-top
  config = launch.config
  print(f'config {launch.config_name}: {config.agent} on {config.env_name}, '
        f'budget {config.max_actor_steps:,} actor steps, '
        f'launch type {launch.launch_type}\n')
  from acme_launch.program import build  # pylint: disable=g-import-not-at-top
  print('environment (as the agent sees it):')
  print(build.describe_spec(launch.built.environment_spec) + '\n')
  print(_describe_nodes(launch.built, launch.launch_type))
  print('\nresource placement:')
  print(table.format_plan(launch.plan))
  for note in launch.notes:
    print(note)
  if launch.cluster is not None:
    from acme_launch.run.ray import cluster as ray_cluster  # pylint: disable=g-import-not-at-top
    print('\n' + ray_cluster.format_fit(launch.cluster))
  print('\ndry run: nothing was started.')


def run_and_report(options: options_lib.Options, launch: Launch) -> int:
  """Runs the prepared program to its end; writes and prints the summary."""
  from acme_launch.run import progress as progress_lib  # pylint: disable=g-import-not-at-top
  from acme_launch.run import summary as summary_lib  # pylint: disable=g-import-not-at-top
  from acme_launch import layout  # pylint: disable=g-import-not-at-top
  from acme_launch.program import build as program_lib  # pylint: disable=g-import-not-at-top
  launch_type, config, config_name = (launch.launch_type, launch.config,
                                      launch.config_name)
  built, run_dir, resume = launch.built, launch.run_dir, launch.resume
  for note in launch.notes:
    print(f'acme-launch: {note}', file=sys.stderr)
  if launch.exposed_reason:
    print(f'acme-launch: warning: {launch.exposed_reason}; '
          '--allow_exposed_listeners: Reverb and Courier servers listen on '
          'every network interface', file=sys.stderr)
  for warning in resume.warnings:
    print(f'acme-launch: warning: {warning}', file=sys.stderr)
  restored_steps = int(resume.counts.get('actor_steps', 0))
  if restored_steps >= config.max_actor_steps:
    print(f'acme-launch: {run_dir} already has {restored_steps:,} actor steps, '
          f'the budget is {config.max_actor_steps:,}: nothing to do. Raise '
          '--config.max_actor_steps to train further.')
    return 0
  _write_run_config(run_dir, config_name, config, built, launch.plan,
                    program_lib.node_seeds(config), launch_type, options.argv,
                    launch.python_path)
  rundir.clear_live_files(run_dir)
  resumed = (f'; resuming from {restored_steps:,} actor steps'
             if resume.checkpoints else '')
  print(f'acme-launch: {config_name} ({config.agent} on {config.env_name}), '
        f'{len(built.program.get_all_nodes())} nodes, {launch_type}; '
        f'run directory {run_dir}{resumed}', flush=True)
  if launch.debug_node:
    print(f'acme-launch: {launch.debug_node} runs in this terminal (stdin '
          'attached); the other nodes log to logs/ in the run directory; no '
          'progress lines while debugging.', flush=True)
  reporter = progress_lib.ProgressReporter(
      run_dir, config.max_actor_steps,
      # A debugger prompt in this terminal must not be interleaved.
      every_seconds=math.inf if launch.debug_node else options.progress_every,
      # Node output echoed here would tear a live bar: plain lines then.
      interactive=False if (options.show_output or launch.debug_node or
                            launch_type not in ('local_mp', 'ray')) else None)
  with reporter:
    outcome, auto_resumes = _run_until_done(options, launch, reporter)

  summary = summary_lib.make_summary(run_dir, outcome, config.max_actor_steps,
                                     restored_steps, auto_resumes)
  layout.write_json_atomic(layout.summary_path(run_dir), summary)
  if outcome.failed_node:
    print(f'\nacme-launch: node {outcome.failed_node} failed; the end of its log:\n'
          f'{outcome.failed_log_tail}', file=sys.stderr)
  elif outcome.reason == 'low_disk_space':
    print(f'\nacme-launch: {outcome.failed_log_tail}', file=sys.stderr)
  print('\n' + summary_lib.format_summary(summary))
  print(f'run directory      {run_dir}')
  if launch_type not in ('local_mp', 'ray'):
    # Node threads blocked in C (Reverb, TF) would hold up interpreter exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(outcome.exit_code)  # pylint: disable=protected-access
  return outcome.exit_code


def _run_once(options: options_lib.Options, launch: Launch, built, reporter,
              max_wall_time: float):
  """One run of `built` by the launch type's supervisor: its Outcome."""
  from acme_launch.run import supervisor  # pylint: disable=g-import-not-at-top
  common = dict(show_output=options.show_output, reporter=reporter,
                max_wall_time=max_wall_time,
                max_node_restarts=options.max_node_restarts,
                python_path=launch.python_path,
                compilation_cache=launch.compilation_cache)
  if launch.launch_type == 'ray':
    from acme_launch.run.ray import launch as ray_launch  # pylint: disable=g-import-not-at-top
    runner = ray_launch.RaySupervisor(
        launch.run_dir, launch.cluster,
        allow_public_address=options.allow_public_cluster_address, **common)
    return runner.run_cluster(built, launch.plan)
  runner = supervisor.Supervisor(
      launch.run_dir, preload=launch.preload,
      debug_node=launch.debug_node, pdb=launch.pdb,
      node_log_max_bytes=int(options.node_log_max_mb * 2**20),
      disk_guard_bytes=int(options.disk_guard_mb * 2**20), **common)
  if launch.launch_type == 'local_mp':
    return runner.run_multiprocess(built, launch.plan)
  return runner.run_threads(built, launch.launch_type)


def _run_until_done(options: options_lib.Options, launch: Launch, reporter):
  """Runs the program; with --auto_resume, again from its checkpoints after
  a stateful node's failure. Returns (outcome, auto resumes made); the
  outcome's wall time and node restarts cover every attempt."""
  from acme_launch.run import resume as resume_lib  # pylint: disable=g-import-not-at-top
  from acme_launch.program import build as program_lib  # pylint: disable=g-import-not-at-top
  built = launch.built
  wall_time, node_restarts, resumes = 0.0, collections.Counter(), 0
  while True:
    outcome = _run_once(options, launch, built, reporter,
                        max_wall_time=(options.max_wall_time - wall_time
                                       if options.max_wall_time else 0.0))
    wall_time += outcome.wall_time
    node_restarts.update(outcome.restarts)
    if (outcome.reason != 'node_failed' or resumes >= options.auto_resume or
        topology.restartable(outcome.failed_node)):
      break
    resumes += 1
    print(f'acme-launch: node {outcome.failed_node} failed; resuming the whole '
          f'program from its last checkpoints (--auto_resume: {resumes} of '
          f'{options.auto_resume}). The end of its log:\n'
          f'{outcome.failed_log_tail}', file=sys.stderr, flush=True)
    try:
      for warning in resume_lib.verify_for_resume(launch.run_dir).warnings:
        print(f'acme-launch: warning: {warning}', file=sys.stderr)
    except errors.LaunchError as e:
      print(f'acme-launch: cannot resume: {e}', file=sys.stderr)
      break
    # Nodes are bound to their first launch's addresses: build them anew.
    built = program_lib.make_program(launch.config, launch.plan, launch.run_dir)
  outcome.wall_time = wall_time
  outcome.restarts = dict(node_restarts)
  return outcome, resumes


def main(argv: List[str]) -> int:
  """List configs, sweep, dry run, or run and report: flags read once here."""
  del argv  # What absl left: the program's name; options keep sys.argv.
  options = options_lib.read()
  if options.list_configs:
    print(registry.listing())
    return 0
  # The run directory, logs, checkpoints and Launchpad's program file are
  # the user's alone; node processes inherit the mask.
  os.umask(0o077)
  if options.sweep or _is_sweep_resume(options):
    return _sweep_main(options)
  try:
    launch = prepare(options)
  except errors.LaunchError as e:
    _fail(str(e))
  if options.dry_run:
    print_dry_run(launch)
    return 0
  try:
    return run_and_report(options, launch)
  except errors.LaunchError as e:  # A node Ray could not place, a host
    _fail(str(e))                  # that cannot run nodes: nothing left.


def run() -> None:
  app.run(main, flags_parser=parse_flags)
