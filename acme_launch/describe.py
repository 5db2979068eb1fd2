"""A prepared launch as text: what `--dry_run` prints and
`acme_launch.dry_run(...).text` holds, made from the decision alone."""

from acme_launch.plan import replay_memory
from acme_launch.plan import slurm as slurm_lib
from acme_launch.plan import table
from acme_launch.prepare import Launch


def _describe_nodes(built, launch_type: str) -> str:
  process = {'local_mp': 'own process', 'ray': 'own process on a Ray host'
             }.get(launch_type, 'thread of launcher')
  lines = [f'{"node":<14} {"group label":<16} process']
  for label, names in built.nodes_by_label.items():
    for name in names:
      lines.append(f'{name:<14} {label:<16} {process}')
  return '\n'.join(lines)


def _describe_checkpoints(checkpoint) -> str:
  """What the run keeps on disk. Reverb's server keeps its newest save
  and deletes the older ones itself, whatever max_to_keep says."""
  kept = (f'learner and counter keep their newest {checkpoint.max_to_keep} '
          f'(checkpoint.max_to_keep), every {checkpoint.interval_minutes:g} min')
  replay = ('replay keeps its newest only (Reverb deletes the older ones)'
            if checkpoint.replay else 'replay not saved (checkpoint.replay)')
  return f'checkpoints: {kept}; {replay}'


def dry_run_text(launch: Launch) -> str:
  """The whole --dry_run output for `launch`, without its final newline."""
  # Imported here: the program and the Ray cluster module import acme, TF
  # and Ray, which a launch that reached this point has loaded already.
  from acme_launch.program import build
  from acme_launch.run.ray import cluster as ray_cluster
  config = launch.config
  parts = [
      f'config {launch.config_name}: {config.agent} on {config.env_name}, '
      f'budget {config.max_actor_steps:,} actor steps, '
      f'launch type {launch.launch_type}\n',
      'environment (as the agent sees it):',
      build.describe_spec(launch.built.environment_spec) + '\n',
      _describe_nodes(launch.built, launch.launch_type),
      '\nresource placement:',
      table.format_plan(launch.plan),
  ]
  if launch.replay is not None:
    parts.append('\n' + replay_memory.format_plan(launch.replay))
  parts.append('\n' + _describe_checkpoints(config.checkpoint))
  parts.extend(launch.notes)
  if launch.slurm is not None:
    parts.append('\n' + slurm_lib.format_allocation(launch.slurm))
  if launch.cluster is not None:
    parts.append('\n' + ray_cluster.format_fit(launch.cluster))
  parts.append('\ndry run: nothing was started.')
  return '\n'.join(parts)
