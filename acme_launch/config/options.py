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
from acme_launch.config import saved as saved_config


def _define(fv: flags.FlagValues,
            sys_argv: Optional[List[str]] = None) -> None:
  """Defines the launcher's flags in `fv` (config_flags reads the
  --config.FIELD overrides from `sys_argv`, default sys.argv)."""
  config_flags.DEFINE_config_file(
      'config', None,
      'Experiment config: a registry name (see --list_configs) or a path to a '
      'config file. Override fields with --config.FIELD=VALUE, e.g. '
      '--config.num_actors=4 --config.env_name=Hopper-v4.',
      flag_values=fv, sys_argv=sys_argv)
  flags.DEFINE_boolean(
      'list_configs', False,
      'Print the registry configs, one line each, and exit.',
      flag_values=fv)
  flags.DEFINE_enum(
      'launch_type', 'local_mp', experiment_config.LAUNCH_TYPES,
      'local_mp: one process per node. local_mt: one thread per node in this '
      'process (debugging). test_mt: like local_mt, checking nodes pickle. '
      'ray: one process per node on the hosts of a Ray cluster '
      '(--ray_address).',
      flag_values=fv)
  flags.DEFINE_string(
      'workdir', 'runs', 'Folder that holds run directories (and sweep '
      'directories): yours or root\'s and writable by nobody else, or a '
      'shared folder with the sticky bit such as /tmp; not a symbolic link.',
      flag_values=fv)
  flags.DEFINE_string(
      'run_name', '', 'Run directory name under --workdir: letters, digits '
      'and . _ , = + -, not starting with .; default '
      '<config>_<date>-<time>-<random hex>, a folder the run makes new. An '
      'existing run directory of yours, writable by nobody else, is resumed. '
      'With --sweep: the sweep directory\'s name, default '
      '<config>_sweep_<date>-<time>-<random hex>.',
      flag_values=fv)
  flags.DEFINE_string(
      'resume', '', 'Run directory to resume (same as --workdir and --run_name '
      'naming it); only one of yours that nobody else can change (not a '
      'link, writable by you alone). Without --config, the config saved in '
      'it is used, with '
      'any --config.FIELD=VALUE overrides applied (e.g. a raised '
      '--config.max_actor_steps). A '
      'sweep directory (one with sweep.json) runs the sweep\'s unfinished '
      'points with its saved flags.',
      flag_values=fv)
  flags.DEFINE_boolean(
      'show_output', False, 'Also show every node\'s output in this terminal, '
      'each line prefixed with its node (it always goes to logs/ in the run '
      'directory).',
      flag_values=fv)
  flags.DEFINE_float(
      'max_wall_time', 0.0, 'Stop the run (checkpoints saved) after this many '
      'seconds, whatever the step budget; 0 means no limit.', lower_bound=0.0,
      flag_values=fv)
  flags.DEFINE_float(
      'progress_every', 10.0, 'Seconds between progress lines when the output '
      'is not a terminal (a terminal gets a live progress bar).',
      lower_bound=0.1,
      flag_values=fv)
  flags.DEFINE_boolean(
      'dry_run', False, 'Print the nodes, their groups, processes and resource '
      'placement, then exit without starting anything. With --sweep: the '
      'points and the cores/GPUs of each slot (with ray: how many points '
      'the cluster holds at once).',
      flag_values=fv)
  flags.DEFINE_string(
      'gpu_inventory', '', 'JSON file describing the GPUs to plan for, instead '
      'of asking the driver (for planning machines you are not on).',
      flag_values=fv)
  flags.DEFINE_string(
      'debug_node', '', 'local_mp: run this node (e.g. learner/0; see '
      '--dry_run for the names) in the foreground of this terminal with stdin '
      'attached, so breakpoint() in its code stops there; every other node '
      'runs '
      'as usual. With --pdb, an exception in it opens a post-mortem debugger '
      'instead of ending the run. (Under local_mt, --pdb alone does this for '
      'every node.)',
      flag_values=fv)
  flags.DEFINE_integer(
      'max_node_restarts', 3,
      'local_mp and ray: an actor or evaluator that exits '
      'non-zero or is killed is started again, up to this many times per node, '
      'and the run goes on; past that, or when the learner, replay or counter '
      'dies, the run stops (see --auto_resume).', lower_bound=0,
      flag_values=fv)
  flags.DEFINE_enum(
      'node_start', 'fork', ('exec', 'fork'),
      'local_mp: how node processes start. fork: one fork server imports '
      'TensorFlow, JAX, Reverb, Acme and EnvPool once and forks every node '
      'from it. exec: each is a new Python that imports them itself (seconds '
      'of CPU each). Under fork, a node that sees a GPU, --debug_node, and a node whose '
      'JAX_*, TF_*, OMP_*, OPENBLAS_*, MKL_*, PYTHON* or LD_* variables '
      '(read at import) differ from the fork server\'s (the first node\'s) '
      'are still started by exec, saying so in their log '
      '(docs/configuration.md).',
      flag_values=fv)
  flags.DEFINE_integer(
      'auto_resume', 0,
      'local_mp and ray: when the learner, replay or counter '
      'fails, start the whole program again from its last checkpoints, '
      'up to this many times.', lower_bound=0,
      flag_values=fv)
  flags.DEFINE_float(
      'node_log_max_mb', 20.0, 'Each node log rotates at this size; '
      '3 older files are kept (logs/NODE.log.1 ...).', lower_bound=0.01,
      flag_values=fv)
  flags.DEFINE_float(
      'disk_guard_mb', 64.0, 'Refuse to start, or stop with checkpoints saved, '
      'when the run directory\'s filesystem has less free than this (or twice '
      'the newest checkpoints, if more); 0 turns the guard off.',
      lower_bound=0.0,
      flag_values=fv)
  flags.DEFINE_boolean(
      'allow_exposed_listeners', False,
      'Start a run even where the loopback shim (acme_launch/run/loopback.py) '
      'cannot be built or does not work: its Reverb and Courier servers then '
      'listen on every network interface of this machine.',
      flag_values=fv)
  flags.DEFINE_string(
      'ray_address', '', '--launch_type=ray: the Ray cluster, HOST:PORT of its '
      'head (`ray start --head --port=PORT`) or auto; default: RAY_ADDRESS.',
      flag_values=fv)
  flags.DEFINE_boolean(
      'allow_open_cluster', False,
      '--launch_type=ray: run on a Ray cluster that answers without Ray\'s '
      'token authentication (RAY_AUTH_MODE=token). Refused otherwise: whoever '
      'reaches such a cluster can run code on its hosts.',
      flag_values=fv)
  flags.DEFINE_boolean(
      'allow_public_cluster_address', False,
      '--launch_type=ray: run even on hosts whose cluster address is public. '
      'Courier and Reverb servers have no authentication: only on a network '
      'nobody else reaches.',
      flag_values=fv)
  flags.DEFINE_enum(
      'run_key', 'hosts', ('hosts', 'all', 'off'),
      'Which connections between the run\'s nodes prove its key '
      '(RUN_DIR/.run_key; docs/reliability-and-security.md): hosts, those '
      'between two hosts of a Ray cluster (peers on one host are screened by '
      'user); all, also those on loopback (--launch_type=local_mp: a process '
      'of the run\'s own user without the key is refused too); off, none: on '
      'a Ray cluster any user of the run\'s hosts then reaches its nodes (a '
      'warning says so; for measuring what the proof costs).',
      flag_values=fv)
  flags.DEFINE_multi_string(
      'sweep', [], 'Run one program per point of a grid, packed on this host '
      '(with --launch_type=ray: on the Ray cluster, as many at once as it '
      'holds): '
      'FIELD=V1,V2,... for any config field (dotted, e.g. '
      'ppo.learning_rate=3e-4,1e-3); repeat the flag, or separate fields with '
      "';', for their product. Each point is a launch.py process with this "
      'command\'s flags plus --config.FIELD=VALUE, in its own run directory '
      'under the sweep directory (--workdir/--run_name, default '
      'runs/<config>_sweep_<date>-<time>-<random hex>), on its own cores '
      '(and GPUs) of this host, or on the cluster. '
      'Finish an interrupted sweep with --resume=SWEEP_DIR. With '
      '--sweep_samples: random search, whose values may be ranges.',
      flag_values=fv)
  flags.DEFINE_integer(
      'sweep_samples', None, 'Random search: run this many points drawn at '
      'random instead of the grid. A --sweep value may then be a range: '
      'FIELD=uniform(LOW,HIGH) or loguniform(LOW,HIGH) for a float field, '
      'int(LOW,HIGH) for an int field (bounds included); a list FIELD=V1,V2,'
      '... is a choice among its values. The drawn values are kept in the '
      'sweep directory (--resume runs the same points).', lower_bound=1,
      flag_values=fv)
  flags.DEFINE_integer(
      'sweep_seed', None, 'With --sweep_samples: the seed the points are '
      'drawn from (default 0); the same flags and seed draw the same points. '
      'It is not the programs\' seed (config.seed, which --sweep may '
      'sweep).', lower_bound=0,
      flag_values=fv)
  flags.register_multi_flags_validator(
      ['sweep_samples', 'sweep'], lambda f: f['sweep_samples'] is None or
      bool(f['sweep']), message='--sweep_samples goes with --sweep (random '
      'search over its ranges and lists)', flag_values=fv)
  flags.register_multi_flags_validator(
      ['sweep_seed', 'sweep_samples'], lambda f: f['sweep_seed'] is None or
      f['sweep_samples'] is not None, message='--sweep_seed goes with '
      '--sweep_samples (the seed of its draws)', flag_values=fv)
  flags.DEFINE_integer(
      'max_concurrent', 0, 'With --sweep: programs at once; on this host each '
      'gets an even share of this launcher\'s cores (and GPUs, when its plan '
      'uses them), the rest queue. 0: as many as the host can place (a core '
      'each, and a GPU each when they use GPUs); with --launch_type=ray, as '
      'many as the Ray cluster holds. A population (--sweep_scheduler=pbt) '
      'with fewer at once than members takes turns, a segment at a time; '
      'at or above its members, every member runs at once, sharing this '
      'host\'s cores if they are fewer.', lower_bound=0,
      flag_values=fv)
  flags.DEFINE_enum(
      'sweep_scheduler', 'fifo', ['fifo', 'asha', 'pbt'], 'With --sweep: '
      'how Ray Tune runs the points. fifo: each to its budget, in order. '
      'pbt: population-based training: the points are one population; at '
      'every --pbt_interval_steps actor steps the worst --pbt_quantile of '
      'them copy the learner checkpoint of one of the best and go on with '
      'its values perturbed (x0.8 or x1.2 within a range, a neighbour in a '
      'list, or drawn again). asha: '
      'asynchronous successive halving (early stopping): at each rung, '
      '--asha_grace_steps actor steps and that times --asha_reduction, '
      '--asha_reduction squared... up to the budget / --asha_reduction, a '
      'point whose latest '
      'evaluation return is below the best 1/--asha_reduction of those '
      'that reached the rung before it is stopped there (checkpoints '
      'saved; its run directory and the table say at which step and why).',
      flag_values=fv)
  flags.DEFINE_integer(
      'asha_grace_steps', None, 'With --sweep_scheduler=asha: actor steps of '
      'the first rung (default: the budget / reduction^2). At least the '
      'config\'s eval_every_steps: a rung compares evaluation returns.',
      lower_bound=1, flag_values=fv)
  flags.DEFINE_integer(
      'asha_reduction', None, 'With --sweep_scheduler=asha: each rung keeps '
      'the best 1/N of the points that reach it, and the next rung is N '
      'times further (default 3).', lower_bound=2, flag_values=fv)
  flags.DEFINE_integer(
      'trial_retries', 0, 'With --sweep: a point\'s program that fails (a '
      'node failed past --max_node_restarts, the launcher died) starts again '
      'from its run directory\'s checkpoints, up to this many times per '
      'point (a population\'s member resumes its segment).', lower_bound=0,
      flag_values=fv)
  flags.DEFINE_integer(
      'pbt_interval_steps', None, 'With --sweep_scheduler=pbt: actor steps '
      'between two comparisons of the population (default: the budget / 4); '
      'at least the config\'s eval_every_steps.', lower_bound=1,
      flag_values=fv)
  flags.DEFINE_float(
      'pbt_quantile', None, 'With --sweep_scheduler=pbt: the fraction of the '
      'population that copies, and is copied from, at each comparison '
      '(default 0.25; at most 0.5).', flag_values=fv)
  flags.register_validator(
      'pbt_quantile', lambda v: v is None or 0 < v <= 0.5,
      message='--pbt_quantile must be a fraction above 0 and at most 0.5',
      flag_values=fv)
  flags.DEFINE_boolean(
      'pbt_freeze', None, 'With --sweep_scheduler=pbt on this host: a '
      'member\'s program waits at a boundary frozen (SIGSTOP), in memory, '
      'its slot given to the next member, and goes on after the comparison '
      '(default: true; every member\'s program is held in memory at once). '
      '--nopbt_freeze: the members take turns a segment at a time, each '
      'stopping at a boundary with its checkpoints saved and starting again '
      'after it, for programs too large to hold all at once.',
      flag_values=fv)
  _only_with_scheduler('pbt', ('pbt_interval_steps', 'pbt_quantile',
                               'pbt_freeze'), fv)
  flags.register_multi_flags_validator(
      ['trial_retries', 'sweep'], lambda f: not f['trial_retries'] or
      bool(f['sweep']), message='--trial_retries goes with --sweep (a single '
      'run restarts its nodes: --max_node_restarts, --auto_resume)',
      flag_values=fv)
  flags.register_multi_flags_validator(
      ['sweep_scheduler', 'sweep'], lambda f: f['sweep_scheduler'] == 'fifo'
      or bool(f['sweep']), message='--sweep_scheduler goes with --sweep (how '
      'its points run)', flag_values=fv)
  _only_with_scheduler('asha', ('asha_grace_steps', 'asha_reduction'), fv)
  flags.DEFINE_string(
      'compilation_cache', '', 'local_mp and ray: folder of JAX\'s persistent '
      'compilation cache, shared by runs: each node reads the functions an '
      'earlier run (or node) compiled instead of compiling them again. '
      'Default: $XDG_CACHE_HOME/acme-launch/jax (~/.cache/acme-launch/jax), on '
      'each host; none: no cache. Its code runs in every node: a folder '
      'that others could change is refused.',
      flag_values=fv)
  flags.DEFINE_list(
      'tracking', [], 'Also send every node\'s metrics to these trackers, '
      'comma-separated: wandb, mlflow (metrics/*.csv and TensorBoard events '
      'are always written; tensorboard may be named too). One tracking run '
      'per program: metrics as NODE/NAME stepped by actor_steps, the '
      'resolved config as parameters, summary.json and the plots at the '
      'end. W&B follows WANDB_MODE (offline: files under RUN_DIR/wandb, '
      'upload with `wandb sync`). --resume continues the same tracking runs '
      '(and, without --tracking, the same trackers). See docs/tracking.md.',
      flag_values=fv)
  flags.DEFINE_string(
      'tracking_uri', '', 'With --tracking=mlflow: the MLflow tracking URI, '
      'a server (http://HOST:PORT, checked before launch) or a store '
      '(file:PATH); default MLFLOW_TRACKING_URI, else a file store in '
      'RUN_DIR/mlruns.',
      flag_values=fv)
  flags.DEFINE_string(
      'tracking_project', '', 'With --tracking: the W&B project and the '
      'MLflow experiment the run goes to (default acme-launch).',
      flag_values=fv)


def _only_with_scheduler(scheduler: str, names: Tuple[str, ...],
                         fv: flags.FlagValues) -> None:
  """Refuses a scheduler's own flags without --sweep_scheduler=it."""
  flags.register_multi_flags_validator(
      ['sweep_scheduler', *names],
      lambda f: f['sweep_scheduler'] == scheduler or all(
          f[n] is None for n in names),
      message=f'--{", --".join(names[:-1])} and --{names[-1]} go with '
      f'--sweep_scheduler={scheduler}', flag_values=fv)


_define(flags.FLAGS)  # The launcher's own command line.


# Flags of the sweep launcher itself, not handed to the programs of a sweep.
SWEEP_ONLY_FLAGS = ('sweep', 'sweep_samples', 'sweep_seed', 'max_concurrent',
                    'sweep_scheduler', 'asha_grace_steps', 'asha_reduction',
                    'pbt_interval_steps', 'pbt_quantile', 'pbt_freeze',
                    'trial_retries',
                    'workdir', 'run_name', 'resume', 'dry_run')


@dataclasses.dataclass(frozen=True)
class Options:
  """What the command line asked for, as plain values (see the flags' help).

  `config` is the --config file's config with its --config.FIELD overrides
  applied; with --resume alone, the run directory's saved one with them
  (None only from the Python API's resume without a config);
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
  node_start: str = 'fork'       # local_mp: 'fork' (a fork server) or 'exec'.
  auto_resume: int = 0
  node_log_max_mb: float = 20.0
  disk_guard_mb: float = 64.0
  allow_exposed_listeners: bool = False
  ray_address: str = ''
  allow_public_cluster_address: bool = False
  allow_open_cluster: bool = False
  run_key: str = 'hosts'         # 'hosts', 'all' (loopback too) or 'off'.
  sweep: Tuple[str, ...] = ()
  max_concurrent: int = 0
  sweep_samples: int = 0         # 0: a grid.
  sweep_seed: int = 0
  sweep_scheduler: str = 'fifo'
  asha_grace_steps: int = 0      # 0: the budget / reduction^2.
  asha_reduction: int = 0        # 0: 3.
  pbt_interval_steps: int = 0    # 0: the budget / 4.
  pbt_quantile: float = 0.0      # 0: 0.25.
  pbt_freeze: bool = True
  trial_retries: int = 0
  compilation_cache: str = ''    # '': the default folder; 'none': off.
  # --tracking's names as given (checked by prepare: tracking.check_choice).
  tracking: Tuple[str, ...] = ()
  tracking_uri: str = ''
  tracking_project: str = ''
  # Folders of the user's code: the --config file's own folder (so modules
  # beside it import in the launcher and in every node), unless it is a
  # shipped config.
  python_path: Tuple[str, ...] = ()


def read(argv: Optional[List[str]] = None,
         fv: flags.FlagValues = flags.FLAGS) -> Options:
  """The parsed flags as Options: the one place flag values are read."""

  def value(name: str):
    return fv[name].value

  config_name, python_path = '', ()
  if value('config') is not None:
    path, _, run_dir = config_flags.get_config_filename(
        fv['config']).partition(':')
    config_name = os.path.splitext(os.path.basename(path))[0]
    if _is_saved_config_file(path):  # --resume alone: its saved name, code.
      saved = saved_config.read(run_dir)
      config_name = saved.get('config_name', 'resumed')
      python_path = tuple(saved.get('python_path', ()))
    elif not registry.is_shipped(path):
      python_path = (os.path.dirname(os.path.abspath(path)),)
  return Options(
      config=value('config'), config_name=config_name,
      argv=tuple(sys.argv if argv is None else argv),
      **{name: value(name) for name in _PLAIN_FLAGS},
      # absl.app defines --pdb (alias of --pdb_post_mortem) for the
      # launcher's own exceptions; the same flag asks for it in the nodes.
      pdb=bool(value('pdb_post_mortem')),
      sweep=tuple(value('sweep')),
      sweep_samples=value('sweep_samples') or 0,
      sweep_seed=value('sweep_seed') or 0,
      asha_grace_steps=value('asha_grace_steps') or 0,
      asha_reduction=value('asha_reduction') or 0,
      pbt_interval_steps=value('pbt_interval_steps') or 0,
      pbt_quantile=value('pbt_quantile') or 0.0,
      pbt_freeze=value('pbt_freeze') is not False,
      compilation_cache=value('compilation_cache').strip(),
      tracking=tuple(n.strip() for n in value('tracking') if n.strip()),
      tracking_uri=value('tracking_uri').strip(),
      tracking_project=value('tracking_project').strip(),
      python_path=python_path)


# Flags read as they are into the Options field of the same name.
_PLAIN_FLAGS = (
    'list_configs', 'launch_type', 'workdir', 'run_name', 'resume',
    'show_output', 'max_wall_time', 'progress_every', 'dry_run',
    'gpu_inventory', 'debug_node', 'max_node_restarts', 'node_start', 'auto_resume',
    'node_log_max_mb', 'disk_guard_mb', 'allow_exposed_listeners',
    'ray_address', 'allow_public_cluster_address', 'allow_open_cluster',
    'run_key', 'max_concurrent', 'sweep_scheduler', 'trial_retries')


def _is_saved_config_file(path: str) -> bool:
  return os.path.realpath(path) == os.path.realpath(saved_config.__file__)


def _flag_value(argv: List[str], name: str) -> Optional[str]:
  """The last value of --NAME=V or --NAME V in `argv` (None if absent)."""
  found = None
  for i, arg in enumerate(argv):
    if arg == f'--{name}' and i + 1 < len(argv):
      found = argv[i + 1]
    elif arg.startswith(f'--{name}='):
      found = arg[len(f'--{name}='):]
  return found


def _saved_config_argument(argv: List[str]) -> List[str]:
  """`--resume=DIR` without --config: `argv` with --config naming DIR's saved
  config (config/saved.py), so that --config.FIELD overrides apply to it.
  As is when DIR holds no config.json (a sweep directory, or a mistake that
  prepare reports); LaunchError when DIR is a folder others could change
  (safe_dirs.py)."""
  given = _flag_value(argv, 'resume')
  if not given or _flag_value(argv, 'config') is not None:
    return argv
  run_dir = os.path.abspath(given)
  # LaunchError where the folder fails safe_dirs' checks: nothing is read
  # from it then. (A sweep directory holds sweep.json: sweep/record.py.)
  kind = ('sweep directory'
          if os.path.isfile(os.path.join(run_dir, 'sweep.json'))
          else 'run directory')
  if saved_config.read(run_dir, f'--resume={given}: {kind}') is None:
    return argv
  return [argv[0], f'--config={saved_config.__file__}:{run_dir}', *argv[1:]]


def _resolve_config_argument(argv: List[str]) -> List[str]:
  """Rewrites `--config=NAME` to the registry file's path, and adds the
  saved config's for --resume alone."""
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
  return _saved_config_argument(resolved)


def parse(argv: List[str], fv: flags.FlagValues = flags.FLAGS) -> List[str]:
  """absl flag parsing of a full command line into `fv` (the launcher's
  flags); LaunchError (one line) for any problem. Returns the arguments
  left (argv[0])."""
  argv = _resolve_config_argument(argv)
  try:
    remaining = fv(argv)
    if not fv['list_configs'].value and not fv['resume'].value:
      if fv['config'].value is None:
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
  the launcher's own, into flags of their own: the launcher's stay as
  they are."""
  fv = flags.FlagValues()
  _define(fv, sys_argv=_resolve_config_argument(list(argv)))
  # absl.app's --pdb, which the nodes' Options read.
  flags.DEFINE_boolean('pdb_post_mortem', False, 'Post-mortem debugger.',
                       flag_values=fv)
  flags.DEFINE_alias('pdb', 'pdb_post_mortem', flag_values=fv)
  # absl's other flags (--verbosity, ...) decide nothing here.
  theirs = [name for name in flags.FLAGS
            if name not in fv and not name.startswith('config.')]
  parse(argv_without(list(argv), theirs), fv)
  return read(argv, fv)


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
