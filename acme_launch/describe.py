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
  parts.extend(launch.notes)
  if launch.slurm is not None:
    parts.append('\n' + slurm_lib.format_allocation(launch.slurm))
  if launch.cluster is not None:
    parts.append('\n' + ray_cluster.format_fit(launch.cluster))
  parts.append('\ndry run: nothing was started.')
  return '\n'.join(parts)
