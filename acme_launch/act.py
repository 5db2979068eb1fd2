"""Acting on a decision: what a run takes before its supervisor starts.

prepare.py decides and touches nothing. Here the fork server starts between
the decision's two steps (local_mp, --node_start=fork: its imports overlap
the launcher's own and the program's build, the start-up win bench/startup.py
measures), and the run directory is taken: created private to the user,
locked, its checkpoints verified for resume, its free space checked, all
on the folder it opened without following links (safe_dirs.py); the
compilation cache folder is checked too. A LaunchError here stops the fork
server and gives the run directory back before it leaves; driver.py runs the
`Taken`.
"""

import dataclasses
from typing import TYPE_CHECKING, List, Optional, Tuple

from acme_launch import compilation_cache as cache_lib
from acme_launch import errors
from acme_launch import prepare
from acme_launch.run import rundir

if TYPE_CHECKING:  # Heavy imports, for the annotations only.
  from acme_launch.run import forkserver
  from acme_launch.run import resume as resume_lib


@dataclasses.dataclass(frozen=True)
class Taken:
  """A decided launch with what its run took: the run directory (locked by
  this process), its checkpoints, the cache folder, the fork server."""
  launch: prepare.Launch
  resume: 'resume_lib.ResumeState'  # The checkpoints a resume restores.
  compilation_cache: str            # The folder handed to the nodes ('': none).
  notes: Tuple[str, ...]            # Lines to show, after the decision's.
  # --node_start=fork under local_mp: the fork server, started while the
  # program was built; the first supervisor adopts it.
  fork_server: Optional['forkserver.ForkServer'] = None


def take(early: prepare.Early) -> Taken:
  """The fork server started from `early`'s plan, the decision finished
  (prepare.decide) meanwhile, then the run directory taken. LaunchError if
  the input is refused: the fork server is stopped first."""
  fork_server = start_fork_server(early)
  try:
    return _take_run_dir(prepare.decide(early), fork_server)
  except BaseException:
    if fork_server is not None:
      fork_server.stop()
    raise


def start_fork_server(early: prepare.Early) -> Optional['forkserver.ForkServer']:
  """--node_start=fork under local_mp: the fork server with the environment
  the plan gives its first node that may be forked; None otherwise."""
  if not early.starts_fork_server:
    return None
  from acme_launch.paths import ROOT
  from acme_launch.run import forkserver
  from acme_launch.run import process_env
  return forkserver.start_early(
      early.plan, lambda node, env: process_env.node_process_env(
          node, env, run_dir='', python_path=early.python_path,
          preload=early.preload),
      ROOT, skip=early.debug_node)


def _take_run_dir(launch: prepare.Launch, fork_server) -> Taken:
  """The run directory created private, checked and locked, its checkpoints
  read; LaunchError (the lock given back) if it cannot be used."""
  from acme_launch.run import disk_space
  from acme_launch.run import resume as resume_lib
  notes: List[str] = []
  cache = _compilation_cache(launch.compilation_cache, launch.launch_type,
                             notes)
  run_dir = launch.run_dir
  # Made (exclusively under a name chosen at random) or opened, checked on
  # its descriptor, locked; the decision made the same checks before the
  # fork server started, this makes them on what the run will use.
  rundir.take(run_dir, new=launch.new_run_dir)
  try:
    resume = resume_lib.verify_for_resume(run_dir)
    short = disk_space.shortage(run_dir, launch.supervision.disk_guard_bytes)
    if short:
      raise errors.LaunchError(short)
  except BaseException:
    rundir.unlock(run_dir)
    raise
  return Taken(launch, resume, cache, tuple(notes), fork_server)


def _compilation_cache(folder: str, launch_type: str, notes: List[str]) -> str:
  """The cache folder to hand the nodes ('': none), from --compilation_cache.

  local_mp checks the folder here (it creates it), so that a problem with it
  is one warning line and the run goes on without it; a --compilation_cache
  folder that others could change was refused by the decision, the default
  folder is then not used. A Ray node checks its own host's ('default':
  the default folder there).
  """
  if folder == 'none' or launch_type not in ('local_mp', 'ray'):
    return ''
  if launch_type == 'ray':
    return folder or 'default'
  usable, why = cache_lib.usable(folder or cache_lib.default_dir())
  if why:
    notes.append(f'warning: no compilation cache ({why}); every node '
                 'compiles its functions as usual')
  return usable
