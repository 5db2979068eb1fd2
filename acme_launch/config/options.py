"""The launcher's command line, read once into a frozen Options value.

Every flag is defined here and read in one place (`read`); the rest of the
launcher receives the Options as a plain argument, as Launchpad's examples
pass plain values down. Parsing problems are one line (LaunchError).
"""

import ast
import dataclasses
import os
import sys
from typing import List, Optional, Tuple

from absl import flags
import ml_collections
from ml_collections import config_flags

from acme_launch import errors
from acme_launch.config import schema as experiment_config
from acme_launch.config import registry

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
    'Start a run even where the loopback shim (acme_launch/run/loopback.py) '
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
_COMPILATION_CACHE = flags.DEFINE_string(
    'compilation_cache', '', 'local_mp and ray: folder of JAX\'s persistent '
    'compilation cache, shared by runs: each node reads the functions an '
    'earlier run (or node) compiled instead of compiling them again. '
    'Default: $XDG_CACHE_HOME/acme-launch/jax (~/.cache/acme-launch/jax), on '
    'each host; none: no cache.')

# Flags of the sweep launcher itself, not handed to the programs of a sweep.
SWEEP_ONLY_FLAGS = ('sweep', 'max_concurrent', 'workdir', 'run_name',
                    'resume', 'dry_run')


@dataclasses.dataclass(frozen=True)
class Options:
  """What the command line asked for, as plain values (see the flags' help).

  `config` is the --config file's config with its --config.FIELD overrides
  applied (None with --resume alone: the run directory's saved one is used);
  `argv` is the whole command line, which a sweep hands on to its points.
  """
  config: Optional[ml_collections.ConfigDict]
  config_name: str
  argv: Tuple[str, ...]
  list_configs: bool = False
  launch_type: str = 'local_mp'
  workdir: str = 'runs'
  run_name: str = ''
  resume: str = ''
  show_output: bool = False
  max_wall_time: float = 0.0
  progress_every: float = 10.0
  dry_run: bool = False
  gpu_inventory: str = ''
  debug_node: str = ''
  pdb: bool = False
  max_node_restarts: int = 3
  auto_resume: int = 0
  node_log_max_mb: float = 20.0
  disk_guard_mb: float = 64.0
  allow_exposed_listeners: bool = False
  ray_address: str = ''
  allow_public_cluster_address: bool = False
  sweep: Tuple[str, ...] = ()
  max_concurrent: int = 0
  compilation_cache: str = ''    # '': the default folder; 'none': off.
  # Folders of the user's code: the --config file's own folder (so modules
  # beside it import in the launcher and in every node), unless it is a
  # shipped config.
  python_path: Tuple[str, ...] = ()


def read(argv: Optional[List[str]] = None) -> Options:
  """The parsed flags as Options: the one place flag values are read."""
  config_name, python_path = '', ()
  if _CONFIG.value is not None:
    path = config_flags.get_config_filename(flags.FLAGS['config'])
    config_name = os.path.splitext(os.path.basename(path))[0]
    if not registry.is_shipped(path):
      python_path = (os.path.dirname(os.path.abspath(path)),)
  return Options(
      config=_CONFIG.value, config_name=config_name,
      argv=tuple(sys.argv if argv is None else argv),
      list_configs=_LIST_CONFIGS.value, launch_type=_LAUNCH_TYPE.value,
      workdir=_WORKDIR.value, run_name=_RUN_NAME.value, resume=_RESUME.value,
      show_output=_SHOW_OUTPUT.value, max_wall_time=_MAX_WALL_TIME.value,
      progress_every=_PROGRESS_EVERY.value, dry_run=_DRY_RUN.value,
      gpu_inventory=_GPU_INVENTORY.value, debug_node=_DEBUG_NODE.value,
      # absl.app defines --pdb (alias of --pdb_post_mortem) for the
      # launcher's own exceptions; the same flag asks for it in the nodes.
      pdb=bool(flags.FLAGS.pdb_post_mortem),
      max_node_restarts=_MAX_NODE_RESTARTS.value,
      auto_resume=_AUTO_RESUME.value, node_log_max_mb=_NODE_LOG_MAX_MB.value,
      disk_guard_mb=_DISK_GUARD_MB.value,
      allow_exposed_listeners=_ALLOW_EXPOSED_LISTENERS.value,
      ray_address=_RAY_ADDRESS.value,
      allow_public_cluster_address=_ALLOW_PUBLIC_CLUSTER_ADDRESS.value,
      sweep=tuple(_SWEEP.value), max_concurrent=_MAX_CONCURRENT.value,
      compilation_cache=_COMPILATION_CACHE.value.strip(),
      python_path=python_path)


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


def parse(argv: List[str]) -> List[str]:
  """absl flag parsing of a full command line; LaunchError (one line) for
  any problem. Returns the arguments left (argv[0])."""
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


def parse_again(argv: List[str]) -> Options:
  """Options of another command line (a sweep's point), parsed exactly as
  the launcher's own; the flags are left parsed from `argv`."""
  for name in [n for n in flags.FLAGS if n.startswith('config.')]:
    delattr(flags.FLAGS, name)  # Defined by config_flags on each parse.
  flags.FLAGS.unparse_flags()
  # config_flags reads the --config.FIELD overrides from sys.argv.
  saved_argv, sys.argv = sys.argv, list(argv)
  try:
    parse(list(argv))
    return read(argv)
  finally:
    sys.argv = saved_argv
    if not flags.FLAGS.is_parsed():  # A parse that failed: absl's app.run
      flags.FLAGS.mark_as_parsed()   # still reads flags on the way out.


# Flags whose values are paths, read relative to the working directory.
_PATH_FLAGS = ('config', 'workdir', 'resume', 'gpu_inventory',
               'compilation_cache')


def paths_from(argv: List[str], cwd: str) -> List[str]:
  """`argv` with the relative paths of its path flags made absolute from
  `cwd` (a registry name of --config stays a name), so that it means what
  it means to a launcher started in `cwd`."""

  def absolute(name: str, value: str) -> str:
    if not value or os.path.isabs(value):
      return value
    if name == 'config' and value in registry.available():
      return value
    if name == 'compilation_cache' and value == 'none':
      return value
    return os.path.join(cwd, value)

  resolved, pending = [], ''
  for arg in argv:
    if pending:
      resolved.append(absolute(pending, arg))
      pending = ''
      continue
    name, eq, value = arg.lstrip('-').partition('=')
    if arg.startswith('--') and name in _PATH_FLAGS:
      if eq:
        resolved.append(f'--{name}={absolute(name, value)}')
        continue
      pending = name
    resolved.append(arg)
  return resolved


def argv_without(argv: List[str], names) -> List[str]:
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
