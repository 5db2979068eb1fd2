"""Command line: flags -> config -> resource plan -> program -> supervisor.

Every check of user input happens here, before any process starts; a bad
input prints one line (`acme-launch: error: ...`) and exits with code 2.
"""

import ast
import collections
import dataclasses
import datetime
import importlib.metadata
import math
import os
import sys
from typing import Any, List, Optional, Tuple

from absl import app
from absl import flags
import ml_collections
from ml_collections import config_flags

from acme_launch import errors
from acme_launch import experiment_config
from acme_launch import registry
from acme_launch import topology

EXIT_BAD_INPUT = 2

_CONFIG = config_flags.DEFINE_config_file(
    'config', None,
    'Experiment config: a registry name (see --list_configs) or a path to a '
    'config file. Override fields with --config.FIELD=VALUE, e.g. '
    '--config.num_actors=4 --config.env_name=Hopper-v4.')
_LIST_CONFIGS = flags.DEFINE_boolean(
    'list_configs', False, 'Print the registry configs, one line each, and exit.')
_LAUNCH_TYPE = flags.DEFINE_enum(
    'launch_type', 'local_mp', experiment_config.LAUNCH_TYPES,
    'local_mp: one process per node. local_mt: one thread per node in this '
    'process (debugging). test_mt: like local_mt, checking nodes pickle. '
    'ray: one process per node on the hosts of a Ray cluster (--ray_address).')
_WORKDIR = flags.DEFINE_string(
    'workdir', 'runs', 'Folder that holds run directories (and sweep '
    'directories).')
_RUN_NAME = flags.DEFINE_string(
    'run_name', '', 'Run directory name under --workdir; default '
    '<config>_<date>-<time>. An existing run directory is resumed. With '
    '--sweep: the sweep directory\'s name, default '
    '<config>_sweep_<date>-<time>.')
_RESUME = flags.DEFINE_string(
    'resume', '', 'Run directory to resume (same as --workdir and --run_name '
    'naming it). Without --config, the config saved in it is used as is. A '
    'sweep directory (one with sweep.json) runs the sweep\'s unfinished '
    'points with its saved flags.')
_SHOW_OUTPUT = flags.DEFINE_boolean(
    'show_output', False, 'Also show every node\'s output in this terminal, '
    'each line prefixed with its node (it always goes to logs/ in the run '
    'directory).')
_MAX_WALL_TIME = flags.DEFINE_float(
    'max_wall_time', 0.0, 'Stop the run (checkpoints saved) after this many '
    'seconds, whatever the step budget; 0 means no limit.', lower_bound=0.0)
_PROGRESS_EVERY = flags.DEFINE_float(
    'progress_every', 10.0, 'Seconds between progress lines when the output '
    'is not a terminal (a terminal gets a live progress bar).',
    lower_bound=0.1)
_DRY_RUN = flags.DEFINE_boolean(
    'dry_run', False, 'Print the nodes, their groups, processes and resource '
    'placement, then exit without starting anything. With --sweep: the '
    'points and the cores/GPUs of each slot.')
_GPU_INVENTORY = flags.DEFINE_string(
    'gpu_inventory', '', 'JSON file describing the GPUs to plan for, instead '
    'of asking the driver (for planning machines you are not on).')
_DEBUG_NODE = flags.DEFINE_string(
    'debug_node', '', 'local_mp: run this node (e.g. learner/0; see '
    '--dry_run for the names) in the foreground of this terminal with stdin '
    'attached, so breakpoint() in its code stops there; every other node runs '
    'as usual. With --pdb, an exception in it opens a post-mortem debugger '
    'instead of ending the run. (Under local_mt, --pdb alone does this for '
    'every node.)')
_MAX_NODE_RESTARTS = flags.DEFINE_integer(
    'max_node_restarts', 3, 'local_mp and ray: an actor or evaluator that exits '
    'non-zero or is killed is started again, up to this many times per node, '
    'and the run goes on; past that, or when the learner, replay, counter or '
    'limiter dies, the run stops (see --auto_resume).', lower_bound=0)
_AUTO_RESUME = flags.DEFINE_integer(
    'auto_resume', 0, 'local_mp and ray: when the learner, replay, counter or '
    'limiter fails, start the whole program again from its last checkpoints, '
    'up to this many times.', lower_bound=0)
_NODE_LOG_MAX_MB = flags.DEFINE_float(
    'node_log_max_mb', 20.0, 'Each node log rotates at this size; '
    '3 older files are kept (logs/NODE.log.1 ...).', lower_bound=0.01)
_DISK_GUARD_MB = flags.DEFINE_float(
    'disk_guard_mb', 64.0, 'Refuse to start, or stop with checkpoints saved, '
    'when the run directory\'s filesystem has less free than this (or twice '
    'the newest checkpoints, if more); 0 turns the guard off.', lower_bound=0.0)
_ALLOW_EXPOSED_LISTENERS = flags.DEFINE_boolean(
    'allow_exposed_listeners', False,
    'Start a run even where the loopback shim (acme_launch/loopback.py) '
    'cannot be built or does not work: its Reverb and Courier servers then '
    'listen on every network interface of this machine.')
_RAY_ADDRESS = flags.DEFINE_string(
    'ray_address', '', '--launch_type=ray: the Ray cluster, HOST:PORT of its '
    'head (`ray start --head --port=PORT`) or auto; default: RAY_ADDRESS.')
_ALLOW_PUBLIC_CLUSTER_ADDRESS = flags.DEFINE_boolean(
    'allow_public_cluster_address', False,
    '--launch_type=ray: run even on hosts whose cluster address is public. '
    'Courier and Reverb servers have no authentication: only on a network '
    'nobody else reaches.')
_SWEEP = flags.DEFINE_multi_string(
    'sweep', [], 'Run one program per point of a grid, packed on this host: '
    'FIELD=V1,V2,... for any config field (dotted, e.g. '
    'ppo.learning_rate=3e-4,1e-3); repeat the flag, or separate fields with '
    "';', for their product. Each point is a launch.py process with this "
    'command\'s flags plus --config.FIELD=VALUE, in its own run directory '
    'under the sweep directory (--workdir/--run_name, default '
    'runs/<config>_sweep_<date>-<time>), on its own cores (and GPUs). '
    'Finish an interrupted sweep with --resume=SWEEP_DIR.')
_MAX_CONCURRENT = flags.DEFINE_integer(
    'max_concurrent', 0, 'With --sweep: programs at once; each gets an even '
    'share of this launcher\'s cores (and GPUs, when its plan uses them), '
    'the rest queue. 0: as many as the host can place (a core each, and a '
    'GPU each when they use GPUs).', lower_bound=0)

# Flags of the sweep launcher itself, not handed to the programs of a sweep.
_SWEEP_ONLY_FLAGS = ('sweep', 'max_concurrent', 'workdir', 'run_name',
                     'resume', 'dry_run')


def _fail(message: str) -> None:
  print(f'acme-launch: error: {message}', file=sys.stderr)
  sys.exit(EXIT_BAD_INPUT)


def _resolve_config_argument(argv: List[str]) -> List[str]:
  """Rewrites `--config=NAME` to the registry file's path."""
  resolved = list(argv)
  for i, arg in enumerate(resolved):
    if arg == '--config' and i + 1 < len(resolved):
      value, place = resolved[i + 1], i + 1
    elif arg.startswith('--config='):
      value, place = arg[len('--config='):], None
    else:
      continue
    path = registry.resolve(value)
    if path is None:
      raise errors.LaunchError(
          f'unknown config {value!r}; choose one of: '
          f'{", ".join(registry.available())} (or a path to a .py file)')
    if place is None:
      resolved[i] = f'--config={path}'
    else:
      resolved[place] = path
  return resolved


def _parse(argv: List[str]) -> List[str]:
  """absl flag parsing; LaunchError (one line) for any problem."""
  argv = _resolve_config_argument(argv)
  try:
    remaining = flags.FLAGS(argv)
    if not flags.FLAGS.list_configs and not flags.FLAGS.resume:
      if flags.FLAGS['config'].value is None:
        raise errors.LaunchError('--config is required, e.g. '
                                 '--config=ppo_mujoco (see --list_configs)')
  except flags.Error as e:
    raise errors.LaunchError(str(e).splitlines()[0]) from None
  except (AttributeError, KeyError) as e:
    # config_flags: an override naming a field the config does not have.
    # Its message is a repr, e.g. '\'num_actorz\'\nDid you mean ...'.
    message = str(e)
    try:
      message = ast.literal_eval(message)
    except (ValueError, SyntaxError):
      pass
    raise errors.LaunchError('unknown config field in override: ' +
                             ' '.join(str(message).split())) from None
  except (OSError, SyntaxError, ImportError) as e:
    raise errors.LaunchError(
        f'cannot load config: {" ".join(str(e).split())[:300]}') from None
  if len(remaining) > 1:
    raise errors.LaunchError(f'unexpected arguments: {" ".join(remaining[1:])}')
  return remaining


def parse_flags(argv: List[str]) -> List[str]:
  """absl flag parsing that reports any problem as one line and exit 2."""
  try:
    return _parse(argv)
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
                      launch_type) -> None:
  from acme_launch import rundir  # pylint: disable=g-import-not-at-top
  rundir.write_json_atomic(rundir.config_path(run_dir), {
      'config_name': config_name,
      'config': config.to_dict(),
      'identity': built.identity,
      'launch_type': launch_type,
      'argv': sys.argv,
      'node_seeds': seeds,
      'resource_plan': [
          {'node': p.node, 'group': p.group, 'label': p.label,
           'gpus': list(p.gpus), 'cores': list(p.cores), 'env': dict(p.env)}
          for p in plan.placements],
      'python': sys.version,
      'packages': _package_versions(),
  })


def _run_dir_path(config_name: str) -> str:
  if _RESUME.value:
    return os.path.abspath(_RESUME.value)
  run_name = _RUN_NAME.value or (
      f'{config_name}_{datetime.datetime.now():%Y%m%d-%H%M%S}')
  return os.path.abspath(os.path.join(_WORKDIR.value, run_name))


def _load_config():
  """The --config flag's config, or with --resume alone the saved one."""
  from acme_launch import rundir  # pylint: disable=g-import-not-at-top
  if _CONFIG.value is not None:
    path = config_flags.get_config_filename(flags.FLAGS['config'])
    return _CONFIG.value, os.path.splitext(os.path.basename(path))[0]
  saved = rundir.read_json(rundir.config_path(os.path.abspath(_RESUME.value)))
  if saved is None:
    raise errors.LaunchError(
        f'--resume={_RESUME.value}: no run directory with a config.json there')
  config = ml_collections.ConfigDict(saved['config'])
  experiment_config.add_missing_fields(config)
  return config, saved.get('config_name', 'resumed')


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
  resume: Any = None         # checkpointing.ResumeState; None on a dry run
  preload: str = ''          # The loopback shim, preloaded into node processes.
  exposed_reason: str = ''   # Why not, with --allow_exposed_listeners.
  notes: List[str] = dataclasses.field(default_factory=list)  # Lines to show.
  debug_node: str = ''       # Runs in the foreground of this terminal.
  pdb: bool = False          # Post-mortem debugger on a node's exception.
  cluster: Any = None        # ray_cluster.Cluster for --launch_type=ray.


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


def _loopback(launch_type: str) -> Tuple[str, str]:
  """(shim to preload, '') or, with --allow_exposed_listeners, ('', why not)."""
  from acme_launch import loopback  # pylint: disable=g-import-not-at-top
  try:
    path = loopback.ensure()
    if launch_type != 'local_mp' and not loopback.active_in_this_process():
      raise loopback.Unavailable(
          'the loopback shim could not be preloaded into this launcher, '
          f'where {launch_type} runs every server')
  except loopback.Unavailable as e:
    if loopback.only_loopback_interfaces():
      return '', ''  # Nothing can reach this network namespace from outside.
    if not _ALLOW_EXPOSED_LISTENERS.value:
      raise errors.LaunchError(
          f'{e}; without it Reverb and Courier servers listen on every '
          'network interface. Run scripts/setup.sh (it needs a C compiler), '
          'or pass --allow_exposed_listeners to run anyway') from None
    return '', str(e)
  return path, ''


def connect_cluster() -> Tuple[str, Any]:
  """--launch_type=ray: (address, hosts) of the cluster; LaunchError if not.

  Imports only ray: main() calls it before the heavy imports, so that an
  unreachable address is reported within seconds.
  """
  from acme_launch import ray_cluster  # pylint: disable=g-import-not-at-top
  address = ray_cluster.resolve_address(_RAY_ADDRESS.value)
  hosts = ray_cluster.connect(address)
  ray_cluster.check_addresses(hosts, _ALLOW_PUBLIC_CLUSTER_ADDRESS.value)
  return address, hosts


def prepare_launch(dry_run: bool, connected_cluster=None) -> Launch:
  """Every check and decision before any process starts, from parsed flags.

  Loads and validates the config, plans resources and builds the program
  (for --launch_type=ray, also connects to the cluster unless given
  `connected_cluster` from connect_cluster(), and checks it can hold it);
  unless `dry_run`, also checks the loopback shim and takes the run directory
  (created private, locked, checkpoints read for resume). Raises LaunchError
  (exit 2, one line) for every bad input; nothing is started.
  """
  # Heavy imports (acme, launchpad, TF) only once the input parsed.
  from acme_launch import agents  # pylint: disable=g-import-not-at-top
  from acme_launch import checkpointing  # pylint: disable=g-import-not-at-top
  from acme_launch import disk_space  # pylint: disable=g-import-not-at-top
  from acme_launch import program as program_lib  # pylint: disable=g-import-not-at-top
  from acme_launch import gpu_inventory  # pylint: disable=g-import-not-at-top
  from acme_launch import resources  # pylint: disable=g-import-not-at-top
  from acme_launch import rundir  # pylint: disable=g-import-not-at-top

  launch_type = _LAUNCH_TYPE.value
  config, config_name = _load_config()
  experiment_config.validate(config)
  if launch_type == 'ray':
    from acme_launch import ray_cluster  # pylint: disable=g-import-not-at-top
    address, hosts = connected_cluster or connect_cluster()
  if config.agent not in agents.ADAPTERS:
    raise errors.LaunchError(
        f'config.agent {config.agent!r} is unknown; known agents: '
        f'{", ".join(agents.ADAPTERS)}')
  inventory = resources.read_inventory(_GPU_INVENTORY.value)
  learner_devices = agents.get_adapter(config.agent).LEARNER_DEVICES
  # Only local_mp starts a process per node on this host: pin them within
  # the cores this launcher may use (a sweep or `taskset` gives it a slice).
  host_cores = (sorted(os.sched_getaffinity(0)) if launch_type == 'local_mp'
                else None)
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
  run_dir = _run_dir_path(config_name)
  built = program_lib.make_program(config, plan, run_dir)
  node_names = [n for names in built.nodes_by_label.values() for n in names]
  # absl.app defines --pdb (alias of --pdb_post_mortem) for the launcher's
  # own exceptions; the same flag asks for it in the debugged nodes.
  pdb = bool(flags.FLAGS.pdb_post_mortem)
  _check_debugging(launch_type, _DEBUG_NODE.value, pdb, node_names)
  if _AUTO_RESUME.value and launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        '--auto_resume works with --launch_type=local_mp or ray only (under '
        'local_mt and test_mt a failure ends this process)')
  launch = Launch(config, config_name, launch_type, plan, built, run_dir,
                  debug_node=_DEBUG_NODE.value, pdb=pdb, notes=notes)
  if launch_type == 'ray':
    node_demands = ray_cluster.demands(
        [(node, plan.placement(built.placement_node(node)))
         for names in built.nodes_by_label.values() for node in names])
    launch.cluster = ray_cluster.Cluster(
        address, hosts, ray_cluster.fit(node_demands, hosts), node_demands)
  if dry_run:
    return launch
  if launch_type != 'ray':  # On a cluster, each host checks its own shim.
    launch.preload, launch.exposed_reason = _loopback(launch_type)
  rundir.check_resumable(run_dir, built.identity)
  rundir.prepare(run_dir)
  try:
    os.chmod(run_dir, 0o700)  # Also one an older version left open to others.
  except OSError:
    pass  # Not ours to change; writable, as prepare() checked.
  rundir.lock(run_dir)
  launch.resume = checkpointing.verify_for_resume(run_dir)
  short = disk_space.shortage(run_dir, int(_DISK_GUARD_MB.value * 2**20))
  if short:
    raise errors.LaunchError(short)
  return launch


def check_arguments(argv: List[str]) -> Optional[Launch]:
  """`launch.py ARGV --dry_run`'s decisions, in this process, repeatably.

  Parses `argv` (a full command line, argv[0] included) exactly as the CLI
  does and runs prepare_launch(dry_run=True): LaunchError is what the CLI
  reports with exit 2; a return (None for --list_configs) is exit 0.
  """
  for name in [n for n in flags.FLAGS if n.startswith('config.')]:
    delattr(flags.FLAGS, name)  # Defined by config_flags on each parse.
  flags.FLAGS.unparse_flags()
  # config_flags reads the --config.FIELD overrides from sys.argv.
  saved_argv, sys.argv = sys.argv, list(argv)
  try:
    _parse(list(argv))
    return None if _LIST_CONFIGS.value else prepare_launch(dry_run=True)
  finally:
    sys.argv = saved_argv


def _argv_without(argv: List[str], names) -> List[str]:
  """`argv` less the flags `names` (--NAME=V, --NAME V, --[no]NAME)."""
  kept, skip_value = [], False
  for i, arg in enumerate(argv):
    if skip_value:
      skip_value = False
      continue
    if arg == '--':
      kept.extend(argv[i:])
      break
    name = arg.lstrip('-').split('=', 1)[0] if arg.startswith('-') else ''
    if name in names:
      boolean = name in flags.FLAGS and flags.FLAGS[name].boolean
      skip_value = '=' not in arg and not boolean
      continue
    if name.startswith('no') and name[2:] in names:
      continue
    kept.append(arg)
  return kept


def _is_sweep_resume() -> bool:
  from acme_launch import sweep  # pylint: disable=g-import-not-at-top
  return bool(_RESUME.value) and sweep.is_sweep_dir(_RESUME.value)


def _sweep_options():
  """The sweep's options from the flags, read once; LaunchError if bad."""
  from acme_launch import sweep  # pylint: disable=g-import-not-at-top
  if _DEBUG_NODE.value:
    raise errors.LaunchError('--debug_node runs one node in this terminal: '
                             'not with --sweep, whose programs log to files')
  if _LAUNCH_TYPE.value != 'local_mp':
    raise errors.LaunchError(
        f'--sweep packs local_mp programs on this host; not with '
        f'--launch_type={_LAUNCH_TYPE.value}')
  common = dict(max_concurrent=_MAX_CONCURRENT.value,
                progress_every=_PROGRESS_EVERY.value, dry_run=_DRY_RUN.value)
  if _is_sweep_resume():
    extra = _argv_without(sys.argv[1:], ('resume', 'max_concurrent',
                                          'progress_every', 'dry_run'))
    if extra:
      raise errors.LaunchError(
          f'--resume={_RESUME.value} finishes a sweep with the flags saved in '
          f'its sweep.json; only --max_concurrent, --progress_every and '
          f'--dry_run go with it, not {extra[0]}')
    return sweep.SweepOptions(
        sweep_dir=os.path.abspath(_RESUME.value), resume=True,
        gpu_inventory=_GPU_INVENTORY.value, **common)
  if _RESUME.value:
    raise errors.LaunchError(
        f'--sweep with --resume={_RESUME.value}: that is not a sweep directory '
        '(no sweep.json); resume a sweep with --resume=SWEEP_DIR alone')
  path = config_flags.get_config_filename(flags.FLAGS['config'])
  config_name = os.path.splitext(os.path.basename(path))[0]
  run_name = _RUN_NAME.value or (
      f'{config_name}_sweep_{datetime.datetime.now():%Y%m%d-%H%M%S}')
  return sweep.SweepOptions(
      sweep_dir=os.path.abspath(os.path.join(_WORKDIR.value, run_name)),
      resume=False, specs=tuple(_SWEEP.value),
      base_argv=tuple(_argv_without(sys.argv[1:], _SWEEP_ONLY_FLAGS)),
      config_name=config_name, gpu_inventory=_GPU_INVENTORY.value,
      cwd=os.getcwd(), **common)


def _check_sweep_point(argv: List[str]):
  """A point's launch.py flags, checked as the CLI checks a command line:
  (its resolved config, whether its plan uses GPUs); LaunchError if bad."""
  try:
    launch = check_arguments([sys.argv[0], *argv])
  finally:
    if not flags.FLAGS.is_parsed():  # A parse that failed: absl's app.run
      flags.FLAGS.mark_as_parsed()   # still reads flags on the way out.
  return launch.config, bool(launch.plan.gpu_usage)


def _sweep_main() -> int:
  """--sweep, or --resume of a sweep directory: see acme_launch/sweep.py."""
  from acme_launch import sweep  # pylint: disable=g-import-not-at-top
  try:
    options = _sweep_options()
    # Checking points re-parses the flags: read none after this.
    record, todo, slots = sweep.prepare(options, _check_sweep_point,
                                        _CONFIG.value)
  except errors.LaunchError as e:
    _fail(str(e))
  if options.dry_run:
    print(sweep.describe_dry_run(options, record, todo, slots))
    return 0
  try:
    return sweep.run(options, record, todo, slots)
  except errors.LaunchError as e:  # The sweep directory in use.
    _fail(str(e))


def main(argv: List[str]) -> int:
  del argv
  if _LIST_CONFIGS.value:
    print(registry.listing())
    return 0

  # The run directory, logs, checkpoints and Launchpad's program file are
  # the user's alone; node processes inherit the mask.
  os.umask(0o077)
  if _SWEEP.value or _is_sweep_resume():
    return _sweep_main()
  if _MAX_CONCURRENT.value:
    _fail('--max_concurrent goes with --sweep (programs of a sweep at once)')
  if _LAUNCH_TYPE.value in ('local_mt', 'test_mt') and not _DRY_RUN.value:
    from acme_launch import loopback  # pylint: disable=g-import-not-at-top
    loopback.reexec_preloaded()  # Its servers are threads of this process.

  connected_cluster = None
  if _LAUNCH_TYPE.value == 'ray':
    try:
      connected_cluster = connect_cluster()
    except errors.LaunchError as e:
      _fail(str(e))

  from acme_launch import progress as progress_lib  # pylint: disable=g-import-not-at-top
  from acme_launch import resources  # pylint: disable=g-import-not-at-top
  from acme_launch import summary as summary_lib  # pylint: disable=g-import-not-at-top
  from acme_launch import supervisor  # pylint: disable=g-import-not-at-top
  from acme_launch import rundir  # pylint: disable=g-import-not-at-top
  from acme_launch import program as program_lib  # pylint: disable=g-import-not-at-top

  try:
    launch = prepare_launch(dry_run=_DRY_RUN.value,
                            connected_cluster=connected_cluster)
  except errors.LaunchError as e:
    _fail(str(e))
  launch_type, config, config_name = (launch.launch_type, launch.config,
                                      launch.config_name)
  plan, built, run_dir = launch.plan, launch.built, launch.run_dir
  if _DRY_RUN.value:
    print(f'config {config_name}: {config.agent} on {config.env_name}, '
          f'budget {config.max_actor_steps:,} actor steps, '
          f'launch type {launch_type}\n')
    print(_describe_nodes(built, launch_type))
    print('\nresource placement:')
    print(resources.format_plan(plan))
    for note in launch.notes:
      print(note)
    if launch.cluster is not None:
      from acme_launch import ray_cluster  # pylint: disable=g-import-not-at-top
      print('\n' + ray_cluster.format_fit(launch.cluster))
    print('\ndry run: nothing was started.')
    return 0
  for note in launch.notes:
    print(f'acme-launch: {note}', file=sys.stderr)
  if launch.exposed_reason:
    print(f'acme-launch: warning: {launch.exposed_reason}; '
          '--allow_exposed_listeners: Reverb and Courier servers listen on '
          'every network interface', file=sys.stderr)
  resume = launch.resume

  for warning in resume.warnings:
    print(f'acme-launch: warning: {warning}', file=sys.stderr)
  restored_steps = int(resume.counts.get('actor_steps', 0))
  if restored_steps >= config.max_actor_steps:
    print(f'acme-launch: {run_dir} already has {restored_steps:,} actor steps, '
          f'the budget is {config.max_actor_steps:,}: nothing to do. Raise '
          '--config.max_actor_steps to train further.')
    return 0
  _write_run_config(run_dir, config_name, config, built, plan,
                    program_lib.node_seeds(config), launch_type)
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
      every_seconds=math.inf if launch.debug_node else _PROGRESS_EVERY.value,
      # Node output echoed here would tear a live bar: plain lines then.
      interactive=False if (_SHOW_OUTPUT.value or launch.debug_node or
                            launch_type not in ('local_mp', 'ray')) else None)
  with reporter:
    outcome, auto_resumes = _run_until_done(launch, built, reporter)

  summary = summary_lib.make_summary(run_dir, outcome, config.max_actor_steps,
                                     restored_steps, auto_resumes)
  rundir.write_json_atomic(rundir.summary_path(run_dir), summary)
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


def _run_until_done(launch: Launch, built, reporter):
  """Runs the program; with --auto_resume, again from its checkpoints after
  a stateful node's failure. Returns (outcome, auto resumes made); the
  outcome's wall time and node restarts cover every attempt."""
  from acme_launch import checkpointing  # pylint: disable=g-import-not-at-top
  from acme_launch import program as program_lib  # pylint: disable=g-import-not-at-top
  from acme_launch import restarts  # pylint: disable=g-import-not-at-top
  from acme_launch import supervisor  # pylint: disable=g-import-not-at-top
  wall_time, node_restarts, resumes = 0.0, collections.Counter(), 0
  while True:
    options = dict(show_output=_SHOW_OUTPUT.value, reporter=reporter,
                   max_wall_time=(_MAX_WALL_TIME.value - wall_time
                                  if _MAX_WALL_TIME.value else 0.0))
    if launch.launch_type == 'ray':
      from acme_launch import ray_launch  # pylint: disable=g-import-not-at-top
      runner = ray_launch.RaySupervisor(
          launch.run_dir, launch.cluster,
          allow_public_address=_ALLOW_PUBLIC_CLUSTER_ADDRESS.value,
          max_node_restarts=_MAX_NODE_RESTARTS.value, **options)
      try:
        outcome = runner.run_cluster(built, launch.plan)
      except errors.LaunchError as e:  # A node Ray could not place, a host
        _fail(str(e))                  # that cannot run nodes: nothing left.
    else:
      runner = supervisor.Supervisor(
          launch.run_dir, preload=launch.preload,
          debug_node=launch.debug_node, pdb=launch.pdb,
          max_node_restarts=_MAX_NODE_RESTARTS.value,
          node_log_max_bytes=int(_NODE_LOG_MAX_MB.value * 2**20),
          disk_guard_bytes=int(_DISK_GUARD_MB.value * 2**20), **options)
      if launch.launch_type == 'local_mp':
        outcome = runner.run_multiprocess(built, launch.plan)
      else:
        outcome = runner.run_threads(built, launch.launch_type)
    wall_time += outcome.wall_time
    node_restarts.update(outcome.restarts)
    if (outcome.reason != 'node_failed' or resumes >= _AUTO_RESUME.value or
        topology.restartable(outcome.failed_node)):
      break
    resumes += 1
    print(f'acme-launch: node {outcome.failed_node} failed; resuming the whole '
          f'program from its last checkpoints (--auto_resume: {resumes} of '
          f'{_AUTO_RESUME.value}). The end of its log:\n'
          f'{outcome.failed_log_tail}', file=sys.stderr, flush=True)
    try:
      for warning in checkpointing.verify_for_resume(launch.run_dir).warnings:
        print(f'acme-launch: warning: {warning}', file=sys.stderr)
    except errors.LaunchError as e:
      print(f'acme-launch: cannot resume: {e}', file=sys.stderr)
      break
    # Nodes are bound to their first launch's addresses: build them anew.
    built = program_lib.make_program(launch.config, launch.plan, launch.run_dir)
  outcome.wall_time = wall_time
  outcome.restarts = dict(node_restarts)
  return outcome, resumes


def run() -> None:
  app.run(main, flags_parser=parse_flags)
