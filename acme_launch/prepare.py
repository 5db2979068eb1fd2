"""Every check and decision before any process starts: the launcher's input
becomes a `Launch` value.

options (config/options.py) -> config loaded and validated -> resource plan
(plan/) -> program built (program/) -> run directory taken: `prepare` does
it for the CLI and the Python API, `check_arguments` for a sweep's points.
Every bad input is a LaunchError (one line, exit 2) raised here, before
any node runs; driver.py then runs the Launch. Only the fork server
starts here (local_mp, once the config is checked: its imports overlap
the program's build), and a LaunchError stops it first.
"""

import dataclasses
import datetime
import os
import sys
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import ml_collections

from acme_launch import compilation_cache
from acme_launch import errors
from acme_launch import tracking as tracking_lib
from acme_launch.config import options as options_lib
from acme_launch.config import schema as experiment_config
from acme_launch.plan import host as host_lib
from acme_launch.plan import slurm as slurm_lib
from acme_launch.run import rundir

if TYPE_CHECKING:  # Heavy imports, for the annotations only.
  from acme_launch.plan import replay_memory
  from acme_launch.plan import resources
  from acme_launch.program import build
  from acme_launch.run import resume as resume_lib
  from acme_launch.run import forkserver
  from acme_launch.run.ray import cluster as ray_cluster


def _run_dir_path(options: options_lib.Options, config_name: str) -> str:
  if options.resume:
    return os.path.abspath(options.resume)
  run_name = options.run_name or (
      f'{config_name}_{datetime.datetime.now():%Y%m%d-%H%M%S}')
  return os.path.abspath(os.path.join(options.workdir, run_name))


def _load_config(options: options_lib.Options):
  """(config, its name, the folders of the user's code): the --config flag's,
  or with --resume alone the ones saved in the run directory."""
  from acme_launch import layout
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


@dataclasses.dataclass
class Launch:
  """What the CLI decided before starting the run (see prepare_launch);
  only the fork server may be running yet (`fork_server`)."""
  config: ml_collections.ConfigDict
  config_name: str
  launch_type: str
  plan: 'resources.ResourcePlan'
  built: 'build.BuiltProgram'
  run_dir: str
  resume: Optional['resume_lib.ResumeState'] = None  # None on a dry run.
  preload: str = ''          # The loopback shim, preloaded into node processes.
  exposed_reason: str = ''   # Why not, with --allow_exposed_listeners.
  notes: List[str] = dataclasses.field(default_factory=list)  # Lines to show.
  debug_node: str = ''       # Runs in the foreground of this terminal.
  pdb: bool = False          # Post-mortem debugger on a node's exception.
  cluster: Optional['ray_cluster.Cluster'] = None  # --launch_type=ray.
  # Folders of the user's code, first on the path of every node process.
  python_path: Tuple[str, ...] = ()
  # JAX's persistent compilation cache for the nodes ('': none).
  compilation_cache: str = ''
  # The replay node's memory, planned (None: the agent declares no tables).
  replay: Optional['replay_memory.ReplayPlan'] = None
  # The Slurm job this launcher runs in, read for --dry_run (None outside).
  slurm: Optional['slurm_lib.Allocation'] = None
  # --tracking: W&B / MLflow beyond the CSV and TensorBoard files.
  tracking: tracking_lib.Choice = tracking_lib.Choice()
  # --node_start=fork under local_mp: the fork server, started while the
  # program was built (run/forkserver.py); the first supervisor takes it.
  fork_server: Optional['forkserver.ForkServer'] = None


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
  from acme_launch.run import loopback
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
  from acme_launch.run.ray import cluster as ray_cluster
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
  (exit 2, one line) for every bad input. Under local_mp with
  --node_start=fork it starts the fork server once the config is checked
  (run/forkserver.py, start_early) and returns it in the Launch; an input
  refused after that stops it before the LaunchError leaves here, and it
  has written nothing.
  """
  launch_type, dry_run = options.launch_type, options.dry_run
  config, config_name, python_path = _load_config(options)
  run_dir = _run_dir_path(options, config_name)
  # Trackers checked (packages, server) before the heavy imports: a bad
  # choice is reported within seconds.
  tracking_choice = tracking_lib.check_choice(
      options.tracking, options.tracking_uri, options.tracking_project,
      saved=tracking_lib.read_state(run_dir))

  host = host or host_lib.HostSlice.of_this_process()
  _importable(python_path)
  experiment_config.validate(config)
  preload, exposed_reason = '', ''
  if not dry_run and launch_type != 'ray':  # On a cluster, each host checks its own shim.
    preload, exposed_reason = _loopback(launch_type,
                                        options.allow_exposed_listeners)
  fork_server = None
  if not dry_run and launch_type == 'local_mp' and options.node_start == 'fork':
    fork_server = _start_fork_server_early(config, host, python_path, preload,
                                           options.debug_node)
  try:
    launch = _prepare_program(options, config, config_name, python_path,
                              run_dir, tracking_choice, host, connected_cluster)
  except BaseException:
    if fork_server is not None:
      fork_server.stop()
    raise
  launch.preload, launch.exposed_reason = preload, exposed_reason
  launch.fork_server = fork_server
  return launch


def _start_fork_server_early(config, host: host_lib.HostSlice,
                             python_path: Tuple[str, ...], preload: str,
                             debug_node: str):
  """--node_start=fork: the fork server started now, while this process
  imports and builds the program (run/forkserver.py, start_early), with the
  environment that the CPU plan gives its first node; None if none."""
  from acme_launch.paths import ROOT
  from acme_launch.plan import resources
  from acme_launch.plan import topology
  from acme_launch.run import forkserver
  from acme_launch.run import process_env
  plan = resources.plan_resources(
      topology.node_list(config.num_actors, config.num_evaluators),
      config.resources, (), 1, list(host.cores))
  return forkserver.start_early(
      plan, lambda node, env: process_env.node_process_env(
          node, env, run_dir='', python_path=python_path, preload=preload),
      ROOT, skip=debug_node)


def _prepare_program(options: options_lib.Options, config, config_name: str,
                     python_path: Tuple[str, ...], run_dir: str,
                     tracking_choice, host: host_lib.HostSlice,
                     connected_cluster) -> Launch:
  """prepare_launch's checks and decisions from the resource plan on."""
  launch_type, dry_run = options.launch_type, options.dry_run
  # Heavy imports (acme, launchpad, TF) only once the input parsed.
  from acme_launch import agents
  from acme_launch.run import resume as resume_lib
  from acme_launch.run import disk_space
  from acme_launch.program import build as program_lib
  from acme_launch.plan import gpu_inventory
  from acme_launch.plan import resources

  if launch_type == 'ray':
    from acme_launch.run.ray import cluster as ray_cluster
    address, hosts = connected_cluster or connect_cluster(options)
  inventory = gpu_inventory.read_inventory(options.gpu_inventory,
                                       host.visible_gpus)
  adapter = agents.load(config.agent)
  learner_devices = adapter.learner_devices
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
  built = program_lib.make_program(config, plan, run_dir)
  replay = _plan_replay(adapter, config, built.environment_spec, plan,
                       launch_type)
  node_names = [n for names in built.nodes_by_label.values() for n in names]
  _check_debugging(launch_type, options.debug_node, options.pdb, node_names)
  if options.auto_resume and launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        '--auto_resume works with --launch_type=local_mp or ray only (under '
        'local_mt and test_mt a failure ends this process)')
  launch = Launch(config, config_name, launch_type, plan, built, run_dir,
                  debug_node=options.debug_node, pdb=options.pdb, notes=notes,
                  python_path=python_path, replay=replay,
                  tracking=tracking_choice)
  if launch_type == 'ray':
    node_demands = ray_cluster.demands(
        [(node, plan.placement(node))
         for names in built.nodes_by_label.values() for node in names])
    launch.cluster = ray_cluster.Cluster(
        address, hosts, ray_cluster.fit(node_demands, hosts), node_demands)
  if dry_run:
    launch.slurm = slurm_lib.allocation(os.environ)
    return launch
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


def _plan_replay(adapter, config, environment_spec, plan, launch_type: str):
  """The replay node's memory planned from the adapter's tables (None if it
  declares none); LaunchError if it cannot fit: under Ray, the replay
  node's memory reservation; otherwise this host, where it runs."""
  from acme_launch import agents
  from acme_launch.plan import replay_memory
  if adapter.replay_tables is None:
    return None
  layouts = agents.call(adapter, 'replay_tables', config, environment_spec)
  ray = launch_type == 'ray'
  replay = replay_memory.ReplayPlan(
      replay_memory.estimate(layouts, checkpoints=config.checkpoint.replay),
      limit_mb=plan.placement('replay/0').ray_memory_mb if ray else 0,
      host_bytes=None if ray else replay_memory.host_memory_bytes())
  replay_memory.check(replay)
  return replay


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
                    host: Optional[host_lib.HostSlice] = None,
                    connected_cluster=None) -> Optional[Launch]:
  """`launch.py ARGV --dry_run`'s decisions, in this process, repeatably.

  Parses `argv` (a full command line, argv[0] included) exactly as the CLI
  does and prepares the launch as --dry_run does, as a launcher on `host`
  would (its cores, GPUs, and folder for relative paths; this process's
  unless given; for --launch_type=ray, on `connected_cluster` from
  connect_cluster() if given): LaunchError is what the CLI reports with
  exit 2; a return (None for --list_configs) is exit 0. The sweep checks
  each of its points with it.
  """
  if host is not None:
    argv = options_lib.paths_from(argv, host.cwd)
  options = options_lib.parse_again(argv)
  if options.list_configs:
    return None
  return prepare_launch(dataclasses.replace(options, dry_run=True),
                        connected_cluster, host=host)


def prepare(options: options_lib.Options) -> Launch:
  """prepare_launch, after what must come first: local_mt's re-exec with the
  loopback shim, and a Ray address checked before the heavy imports (an
  unreachable one is reported within seconds)."""
  if options.max_concurrent:
    raise errors.LaunchError(
        '--max_concurrent goes with --sweep (programs of a sweep at once)')
  if options.launch_type in ('local_mt', 'test_mt') and not options.dry_run:
    from acme_launch.run import loopback
    loopback.reexec_preloaded()  # Its servers are threads of this process.
  connected_cluster = None
  if options.launch_type == 'ray':
    connected_cluster = connect_cluster(options)
  return prepare_launch(options, connected_cluster)

