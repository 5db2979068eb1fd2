"""Every check and decision before any process starts, as frozen values;
nothing here starts a process or writes a file.

A launch is decided in two steps so that the fork server's start can
overlap the heavy imports and the program's build (bench/startup.py
measures the win): `decide_early` is what needs no acme, Launchpad or TF
(config loaded and validated, trackers, loopback shim, GPUs, the one
resource plan: an `Early`), `decide` the rest (agent, program, replay,
debugging, Ray fit: a `Launch`). act.py acts on them (fork server between
the two, then the run directory); driver.py runs the result. `prepare`
makes both steps for --dry_run and the Python API's dry_run,
`check_arguments` for a sweep's points. Every bad input is a LaunchError
(one line, exit 2) raised here, before any node runs.
"""

import dataclasses
import datetime
import os
import secrets
import sys
import tempfile
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import ml_collections

from acme_launch import errors
from acme_launch import safe_dirs
from acme_launch import tracking as tracking_lib
from acme_launch.config import options as options_lib
from acme_launch.config import saved as saved_config
from acme_launch.config import schema as experiment_config
from acme_launch.plan import gpu_inventory
from acme_launch.plan import host as host_lib
from acme_launch.plan import resources
from acme_launch.plan import slurm as slurm_lib
from acme_launch.plan import topology
from acme_launch.run import rundir

if TYPE_CHECKING:  # Heavy imports, for the annotations only.
  from acme_launch.plan import replay_memory
  from acme_launch.program import build
  from acme_launch.run.ray import cluster as ray_cluster


def default_run_name(config_name: str, kind: str = '') -> str:
  """<config>_<date>-<time>-<6 hex digits> (kind 'sweep':
  <config>_sweep_...): the random part makes the next name unguessable, so
  that nobody can make that folder first (act makes it exclusively)."""
  return (f'{safe_dirs.safe_name(config_name)}_{kind + "_" if kind else ""}'
          f'{datetime.datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}')


def _run_dir_path(options: options_lib.Options,
                  config_name: str) -> Tuple[str, bool]:
  """(the run directory, whether its name was chosen here: a new folder),
  checked with its workdir (safe_dirs.py); LaunchError if unsafe, a bad
  --run_name or a --resume that names no folder."""
  if options.resume:
    run_dir = os.path.abspath(options.resume)
    safe_dirs.check(run_dir, f'--resume={options.resume}: run directory',
                    missing_ok=False)
    return run_dir, False
  workdir = os.path.abspath(options.workdir)
  if options.run_name:
    safe_dirs.check_name(options.run_name)
    run_dir = os.path.join(workdir, options.run_name)
  else:
    run_dir = os.path.join(workdir, default_run_name(config_name))
  safe_dirs.check(run_dir, 'run directory')
  return run_dir, not options.run_name


def _check_compilation_cache(folder: str, launch_type: str) -> None:
  """A --compilation_cache folder that others could change is refused
  (its compiled code is loaded by every node). Only local_mp's: a Ray node
  checks its own host's, and goes without the cache if it fails."""
  if folder in ('', 'none') or launch_type != 'local_mp':
    return
  safe_dirs.check(os.path.expanduser(folder), 'compilation cache folder',
                  'folder holding the compilation cache')


def _load_config(options: options_lib.Options):
  """(config, its name, the folders of the user's code): the --config flag's
  (with --resume alone on the command line, the run directory's saved one:
  options.py), or for the Python API's resume without a config the ones
  saved in the run directory."""
  if options.config is not None:
    return options.config, options.config_name, options.python_path
  saved = saved_config.read(os.path.abspath(options.resume))
  if saved is None:
    raise errors.LaunchError(
        f'--resume={options.resume}: no run directory with a config.json there')
  return (saved_config.config_of(saved), saved.get('config_name', 'resumed'),
          tuple(options.python_path or saved.get('python_path', ())))


def _importable(python_path: Tuple[str, ...]) -> None:
  """The user's code folders first on this launcher's own path too: it
  loads their adapter and environment to check and plan them."""
  for folder in reversed(python_path):
    if folder not in sys.path:
      sys.path.insert(0, folder)


@dataclasses.dataclass(frozen=True)
class Supervision:
  """How the supervisor runs and watches the program (the flags of the
  same names; sizes in bytes)."""
  show_output: bool = False
  max_wall_time: float = 0.0        # Seconds; 0: no limit.
  progress_every: float = 10.0
  max_node_restarts: int = 3
  auto_resume: int = 0
  node_start: str = 'fork'          # local_mp: 'fork' or 'exec'.
  node_log_max_bytes: int = 20 * 2**20
  disk_guard_bytes: int = 64 * 2**20
  allow_public_cluster_address: bool = False
  run_key: str = 'hosts'            # --run_key: 'hosts', 'all' or 'off'.


@dataclasses.dataclass(frozen=True)
class Early:
  """The part of the decision made before the heavy imports (decide_early):
  enough to start the fork server from its plan."""
  config: ml_collections.ConfigDict
  config_name: str
  launch_type: str
  dry_run: bool
  run_dir: str
  new_run_dir: bool                # Name chosen at random: made exclusively.
  python_path: Tuple[str, ...]     # The user's code folders, first on every path.
  host: host_lib.HostSlice         # The cores and GPUs this launch may use.
  tracking: tracking_lib.Choice
  preload: str                     # The loopback shim, preloaded into nodes.
  exposed_reason: str              # Why not, with --allow_exposed_listeners.
  inventory: Tuple[gpu_inventory.GpuInfo, ...]   # The GPUs planned on.
  plan: resources.ResourcePlan     # The one plan (decide checks the agent).
  notes: Tuple[str, ...]           # Lines to show.
  supervision: Supervision
  debug_node: str
  pdb: bool
  compilation_cache: str           # --compilation_cache as given.
  argv: Tuple[str, ...]            # The command line, saved in config.json.
  # --launch_type=ray: (address, hosts) of the connected cluster.
  connected_cluster: Optional[Tuple[str, Any]] = None

  @property
  def starts_fork_server(self) -> bool:
    """Whether a run of it starts a fork server (local_mp, --node_start=fork)."""
    return (not self.dry_run and self.launch_type == 'local_mp' and
            self.supervision.node_start == 'fork')


@dataclasses.dataclass(frozen=True)
class Launch:
  """Everything decided before the run (see decide); act.py acts on it."""
  config: ml_collections.ConfigDict
  config_name: str
  launch_type: str
  dry_run: bool
  plan: resources.ResourcePlan
  built: 'build.BuiltProgram'
  run_dir: str
  argv: Tuple[str, ...]
  supervision: Supervision
  preload: str = ''          # The loopback shim, preloaded into node processes.
  exposed_reason: str = ''   # Why not, with --allow_exposed_listeners.
  notes: Tuple[str, ...] = ()  # Lines to show.
  debug_node: str = ''       # Runs in the foreground of this terminal.
  pdb: bool = False          # Post-mortem debugger on a node's exception.
  cluster: Optional['ray_cluster.Cluster'] = None  # --launch_type=ray.
  # Folders of the user's code, first on the path of every node process.
  python_path: Tuple[str, ...] = ()
  # --compilation_cache as given ('': the default folder, 'none': off);
  # act.py checks the folder.
  compilation_cache: str = ''
  # The run directory's name was chosen at random: act.py makes it
  # exclusively (someone else's folder of that name is refused).
  new_run_dir: bool = False
  # The replay node's memory, planned (None: the agent declares no tables).
  replay: Optional['replay_memory.ReplayPlan'] = None
  # The Slurm job this launcher runs in, read for --dry_run (None outside).
  slurm: Optional['slurm_lib.Allocation'] = None
  # --tracking: W&B / MLflow beyond the CSV and TensorBoard files.
  tracking: tracking_lib.Choice = tracking_lib.Choice()


def _supervision(options: options_lib.Options) -> Supervision:
  return Supervision(
      show_output=options.show_output, max_wall_time=options.max_wall_time,
      progress_every=options.progress_every,
      max_node_restarts=options.max_node_restarts,
      auto_resume=options.auto_resume, node_start=options.node_start,
      node_log_max_bytes=int(options.node_log_max_mb * 2**20),
      disk_guard_bytes=int(options.disk_guard_mb * 2**20),
      allow_public_cluster_address=options.allow_public_cluster_address,
      run_key=options.run_key)


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
    if launch_type != 'local_mp' and not loopback.screening_in_this_process():
      raise loopback.Unavailable(
          'the loopback shim is not in effect in this launcher, '
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

  Imports only ray: prepare and decide_early call it before the heavy
  imports, so that an unreachable address is reported within seconds.
  """
  from acme_launch.run.ray import cluster as ray_cluster
  address = ray_cluster.resolve_address(options.ray_address)
  hosts = ray_cluster.connect(address)
  ray_cluster.check_token_auth(options.allow_open_cluster)
  ray_cluster.check_addresses(hosts, options.allow_public_cluster_address)
  return address, hosts


def _usable_gpus(options: options_lib.Options, host: host_lib.HostSlice
                 ) -> Tuple[Tuple[gpu_inventory.GpuInfo, ...], str]:
  """(the GPUs to plan on, a note or ''). A run on GPUs this machine's
  jaxlib cannot open (setup installs the CPU build unless it finds a GPU)
  is planned on the CPU; a dry run keeps them, with a note. A Ray cluster's
  GPU hosts are elsewhere: not asked."""
  inventory = tuple(gpu_inventory.read_inventory(options.gpu_inventory,
                                                 host.visible_gpus))
  if not inventory or options.launch_type == 'ray':
    return inventory, ''
  opens, why = gpu_inventory.jax_opens_gpus()
  if opens:
    return inventory, ''
  if options.dry_run:
    return inventory, ('note: this machine\'s jaxlib cannot open these GPUs '
                       f'({why}); a run here would plan every node on the CPU')
  return (), (f'warning: the installed jaxlib cannot open the GPUs ({why}); '
              'every node runs on the CPU. For the GPUs: '
              'ACME_LAUNCH_JAX=cuda12 scripts/setup.sh')


def _host_cores(launch_type: str, host: host_lib.HostSlice):
  """Only local_mp starts a process per node on this host: pin them within
  the cores this launcher may use (a sweep or `taskset` gives it a slice)."""
  return list(host.cores) if launch_type == 'local_mp' else None


def _check_learner_process(launch_type: str,
                           plan: resources.ResourcePlan) -> None:
  """A learner on several devices needs a process of its own: its devices
  (the GPUs it sees, the CPU's split) are set before JAX starts in it."""
  devices = plan.placement('learner/0').devices
  if devices > 1 and launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        f'config.resources.learner.num_devices={devices} needs the learner '
        f'in a process of its own: --launch_type=local_mp or ray (under '
        f'{launch_type} every node is a thread of this launcher, whose JAX '
        'has one CPU device)')


def decide_early(options: options_lib.Options,
                 host: Optional[host_lib.HostSlice] = None,
                 connected_cluster=None) -> Early:
  """The decisions that need neither acme, Launchpad nor TF: the config
  loaded and validated, the trackers and the loopback shim checked, the GPUs
  to plan on, the resource plan within `host` (this process's cores and
  GPUs unless given: a sweep gives a slot's). --launch_type=ray connects to
  the cluster first unless given `connected_cluster` from connect_cluster().
  LaunchError (exit 2, one line) for a bad input; nothing started or written.
  """
  launch_type, dry_run = options.launch_type, options.dry_run
  if options.max_concurrent:
    raise errors.LaunchError(
        '--max_concurrent goes with --sweep (programs of a sweep at once)')
  # Folders first: nothing of the user's is read from one that fails.
  run_dir, new_run_dir = _run_dir_path(options, options.config_name)
  _check_compilation_cache(options.compilation_cache, launch_type)
  if launch_type != 'ray':  # A Ray host checks its own (run/ray/host.py).
    # Where every node's private temp folder is made: TF's AutoGraph writes
    # source files there that the node then imports.
    safe_dirs.check_shared(tempfile.gettempdir(), 'temp folder')
  if options.run_key == 'all' and launch_type != 'local_mp':
    raise errors.LaunchError(
        f'--run_key=all works with --launch_type=local_mp only (under '
        f'{launch_type}: ' + ('peers on one host are screened by user, '
                              'those of other hosts prove the key)'
                              if launch_type == 'ray' else
                              'every server is a thread of this process)'))
  if launch_type == 'ray' and connected_cluster is None:
    connected_cluster = connect_cluster(options)
  if options.auto_resume and launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        '--auto_resume works with --launch_type=local_mp or ray only (under '
        'local_mt and test_mt a failure ends this process)')
  config, config_name, python_path = _load_config(options)
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
    if options.run_key == 'all' and not preload:
      raise errors.LaunchError(
          '--run_key=all needs the loopback shim in every node, and it is not '
          f'in effect here{": " + exposed_reason if exposed_reason else ""}')
  inventory, gpu_note = _usable_gpus(options, host)
  plan = resources.plan_resources(
      topology.node_list(config.num_actors, config.num_evaluators,
                         experiment_config.central_inference(config)),
      config.resources, inventory, _host_cores(launch_type, host),
      agent=str(config.agent))
  _check_learner_process(launch_type, plan)
  return Early(
      config=config, config_name=config_name, launch_type=launch_type,
      dry_run=dry_run, run_dir=run_dir, new_run_dir=new_run_dir,
      python_path=python_path, host=host,
      tracking=tracking_choice, preload=preload, exposed_reason=exposed_reason,
      inventory=inventory, plan=plan,
      notes=_notes(options, gpu_note, plan, dry_run),
      supervision=_supervision(options), debug_node=options.debug_node,
      pdb=options.pdb, compilation_cache=options.compilation_cache,
      argv=tuple(options.argv), connected_cluster=connected_cluster)


def _notes(options: options_lib.Options, gpu_note: str, plan, dry_run: bool
           ) -> Tuple[str, ...]:
  """The lines a run (or its dry run) shows before it starts."""
  notes = []
  # A dry run's GPU note only where the plan uses the GPUs.
  if gpu_note and (plan.gpu_usage or not dry_run):
    notes.append(gpu_note)
  if options.launch_type == 'ray' and options.run_key == 'off':
    notes.append('warning: --run_key=off: connections between the run\'s '
                 'hosts prove nothing; any user of those hosts reaches its '
                 'nodes')
  return tuple(notes)


def decide(early: Early) -> Launch:
  """The rest of the decision, from `early`: the agent loaded, the program
  built, the replay memory, --debug_node and, under Ray, the cluster's fit
  checked; for a run, also that the run directory may be resumed with this
  program. LaunchError (exit 2, one line) for a bad input; nothing started
  or written.

  The plan is early's, made from the config alone: here the agent's
  adapter says whether its learner can use the devices it gives it.
  """
  # Heavy imports (acme, launchpad, TF) only once the input parsed.
  from acme_launch import agents
  from acme_launch.program import build as program_lib
  launch_type, config, plan = early.launch_type, early.config, early.plan
  adapter = agents.load(config.agent)
  devices = plan.placement('learner/0').devices
  if not adapter.uses_devices(devices):
    raise errors.LaunchError(
        f'config.resources.learner.num_devices={devices}: agent '
        f'{config.agent}\'s learner runs on {adapter.devices_text()} '
        "(its adapter's learner_devices; the shipped impala and r2d2 take "
        'any number)')
  built = program_lib.make_program(config, plan, early.run_dir)
  replay = _plan_replay(adapter, config, built.environment_spec, plan,
                        launch_type)
  node_names = [n for names in built.nodes_by_label.values() for n in names]
  _check_debugging(launch_type, early.debug_node, early.pdb, node_names)
  cluster = None
  if launch_type == 'ray':
    from acme_launch.run.ray import cluster as ray_cluster
    address, hosts = early.connected_cluster
    node_demands = ray_cluster.demands(
        [(node, plan.placement(node)) for node in node_names])
    cluster = ray_cluster.Cluster(
        address, hosts, ray_cluster.fit(node_demands, hosts), node_demands)
  if not early.dry_run:
    rundir.check_resumable(early.run_dir, built.identity)
  return Launch(
      config=config, config_name=early.config_name, launch_type=launch_type,
      dry_run=early.dry_run, plan=plan, built=built, run_dir=early.run_dir,
      new_run_dir=early.new_run_dir,
      argv=early.argv, supervision=early.supervision, preload=early.preload,
      exposed_reason=early.exposed_reason, notes=early.notes,
      debug_node=early.debug_node, pdb=early.pdb, cluster=cluster,
      python_path=early.python_path,
      compilation_cache=early.compilation_cache, replay=replay,
      slurm=slurm_lib.allocation(os.environ) if early.dry_run else None,
      tracking=early.tracking)


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


def check_arguments(argv: List[str],
                    host: Optional[host_lib.HostSlice] = None,
                    connected_cluster=None) -> Optional[Launch]:
  """`launch.py ARGV --dry_run`'s decisions, in this process, repeatably.

  Parses `argv` (a full command line, argv[0] included) exactly as the CLI
  does and decides the launch as --dry_run does, as a launcher on `host`
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
  return decide(decide_early(dataclasses.replace(options, dry_run=True),
                             host, connected_cluster))


def prepare(options: options_lib.Options) -> Launch:
  """The whole decision for `options` (--dry_run's; a run's is acted on by
  act.take, which starts the fork server between the two steps). A Ray
  address is checked before the heavy imports: an unreachable one is
  reported within seconds."""
  return decide(decide_early(options))
