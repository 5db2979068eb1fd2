"""The Python API: run a config from a notebook or a script, as the CLI does.

  import acme_launch
  from acme_launch.config import registry
  config = registry.load('ppo_mujoco')       # or your own ConfigDict
  config.max_actor_steps = 200_000
  summary = acme_launch.launch(config, workdir='runs', run_name='ppo_test')
  plan = acme_launch.dry_run(config)         # what --dry_run prints, as values

Both take the launcher's options as keyword arguments (the flags' names:
`launch_type`, `workdir`, `run_name`, `resume`, `ray_address`,
`max_wall_time`, `max_node_restarts`, `auto_resume`, `gpu_inventory`, ...),
and `python_path`: folders of your code put first on every node's path
(default: the working directory, as the CLI puts the config file's folder).
and go through the CLI's own steps: the same validation, resource plan,
program, supervision and run directory. Bad input raises
`acme_launch.errors.LaunchError` whose message is the line the CLI prints;
nothing has started then. `run` returns `summary.json` as a dict, with the
CLI's exit code and the run directory added (`exit_code`: 0 at the budget, 1 when a node failed
for good, 130 on Ctrl-C).
"""

import dataclasses
import os
from typing import Any, Dict, Optional, Tuple

from acme_launch import errors

# Options the API does not take: the CLI's own modes.
_CLI_ONLY = ('config', 'config_name', 'argv', 'list_configs', 'dry_run',
             'sweep', 'max_concurrent', 'debug_node', 'pdb')


@dataclasses.dataclass(frozen=True)
class DryRun:
  """What `--dry_run` prints, as values."""
  config: Any                 # The validated ml_collections.ConfigDict.
  launch_type: str
  nodes: Dict[str, Tuple[str, ...]]  # Launchpad group label -> node names.
  plan: Any                   # plan.resources.ResourcePlan (frozen).
  environment_spec: Any       # acme.specs.EnvironmentSpec the agent sees.
  run_dir: str                # Where a run would write.
  notes: Tuple[str, ...]      # Lines the CLI would print with the plan.
  text: str                   # The whole --dry_run output.
  # plan.replay_memory.ReplayPlan: the replay node's memory estimate and
  # limits (None when the agent declares no replay tables).
  replay: Any = None
  # plan.slurm.Allocation: the Slurm job this process runs in (None outside).
  slurm: Any = None


def _options(config, config_name: str, dry_run: bool, kwargs):
  from acme_launch.config import options as options_lib
  fields = {f.name for f in dataclasses.fields(options_lib.Options)}
  for name in kwargs:
    if name not in fields or name in _CLI_ONLY:
      allowed = sorted(fields - set(_CLI_ONLY))
      raise errors.LaunchError(
          f'unknown option {name!r}; the API takes: {", ".join(allowed)}')
  if config is None and not kwargs.get('resume'):
    raise errors.LaunchError('a config is required (or resume=RUN_DIR)')
  launch_type = kwargs.get('launch_type', 'local_mp')
  if launch_type not in ('local_mp', 'ray'):
    raise errors.LaunchError(
        f'launch_type {launch_type!r}: the Python API runs local_mp or ray '
        'programs (local_mt and test_mt end the calling process)')
  # As the CLI puts the config file's folder first on every node's path,
  # the API puts the caller's working directory (a notebook's modules).
  kwargs.setdefault('python_path', (os.getcwd(),))
  kwargs['python_path'] = tuple(os.path.abspath(p)
                                for p in kwargs['python_path'])
  return options_lib.Options(
      config=config, config_name=config_name or 'run',
      argv=('acme_launch.launch',), dry_run=dry_run, **kwargs)


def _early(config, config_name, dry_run, kwargs):
  """The decision's first step (prepare.decide_early) for these arguments."""
  from acme_launch import prepare
  from acme_launch import quiet
  quiet.quiet_third_party()
  return prepare.decide_early(_options(config, config_name, dry_run, kwargs))


def dry_run(config=None, *, config_name: str = '', **options) -> DryRun:
  """The plan of `config` without starting anything (--dry_run's values)."""
  from acme_launch import describe
  from acme_launch import prepare
  launch = prepare.decide(_early(config, config_name, True, options))
  return DryRun(
      config=launch.config, launch_type=launch.launch_type,
      nodes={label: tuple(names)
             for label, names in launch.built.nodes_by_label.items()},
      plan=launch.plan, environment_spec=launch.built.environment_spec,
      run_dir=launch.run_dir, notes=tuple(launch.notes),
      text=describe.dry_run_text(launch) + '\n', replay=launch.replay,
      slurm=launch.slurm)


def launch(config=None, *, config_name: str = '',
        **options) -> Dict[str, Any]:
  """Runs `config` to its end as `python launch.py` would; its summary."""
  from acme_launch import act
  from acme_launch import layout
  from acme_launch.run import rundir
  from acme_launch import driver
  # The run directory is the user's alone: node processes (and the fork
  # server act.py starts) inherit the mask.
  previous = os.umask(0o077)
  try:
    taken = act.take(_early(config, config_name, False, options))
    try:
      code = driver.run_and_report(taken)
    finally:
      rundir.unlock(taken.launch.run_dir)
  finally:
    os.umask(previous)
  run_dir = taken.launch.run_dir
  summary: Optional[Dict[str, Any]] = layout.read_json(
      layout.summary_path(run_dir))
  return {**(summary or {}), 'exit_code': code, 'run_dir': run_dir}


def evaluate_run(run_dir: str, *, episodes: int = 0, checkpoint: str = '',
                 sample: bool = False, seed: Optional[int] = None,
                 config=None, video: bool = False, video_episodes: int = 0,
                 echo=print) -> Dict[str, Any]:
  """`python -m acme_launch.evaluate RUN_DIR` (acme_launch/evaluate.py):
  plays the run's policy from its newest learner checkpoint (or
  `checkpoint`) for `episodes` episodes (default the config's
  final_eval_episodes), with the final evaluation's seeds unless `seed`;
  `config`: the run's config changed (another task with the same spaces,
  another setting; `acme_launch.use.restore.read_run(run_dir).config` is
  the saved one). Prints with `echo`; returns the figures it wrote under
  RUN_DIR/evaluations/ (with their `path`). LaunchError: bad input,
  nothing written."""
  from acme_launch.use import evaluate
  if video:
    from acme_launch.envs import video as video_lib
    video_lib.choose_gl()  # Before MuJoCo is imported, where it is not yet.
  return evaluate.evaluate(evaluate.Request(
      run_dir=run_dir, episodes=episodes, checkpoint=checkpoint,
      sample=sample, seed=seed, config=config, video=video,
      video_episodes=video_episodes), echo)
