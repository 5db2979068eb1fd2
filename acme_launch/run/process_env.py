"""The whole environment of a node's process on this host (local_mp).

One function, shared by the supervisor (run/local_mp/launch.py), which starts
node processes, and the early start of the fork server (run/forkserver.py),
which must see the environment those processes will get.

A node inherits the launcher's environment less its credentials
(credentials.node_environ: the launcher tracks, its nodes do not), except
the variables the plan's `pass_env` names for it.
"""

import os
from typing import Dict, Mapping, Sequence

from acme_launch import credentials
from acme_launch import paths
from acme_launch.plan import node_env
from acme_launch.run import loopback


def node_process_env(node: str, overrides: Mapping[str, str], *,
                     run_dir: str, compilation_cache: str = '',
                     pdb: bool = False, python_path: Sequence[str] = (),
                     preload: str = '') -> Dict[str, str]:
  """This process's environment less its credentials (but those the plan's
  pass_env keeps), with the plan's `overrides` for `node`, the
  launcher's own fields (node, run directory, cache, --pdb), the user's code
  folders and the package first on PYTHONPATH, unbuffered output, and the
  loopback shim `preload` ('' for none) first in LD_PRELOAD."""
  passed = node_env.NodeEnv.from_environ(overrides).pass_env
  inherited = credentials.node_environ(os.environ, passed)
  env = node_env.updated({**inherited, **overrides}, node=node,
                         run_dir=run_dir, compilation_cache=compilation_cache,
                         pdb=pdb, bind_address='')  # Loopback, screened.
  env['PYTHONPATH'] = os.pathsep.join(
      p for p in (*python_path, paths.ROOT, env.get('PYTHONPATH', ''))
      if p)
  env['PYTHONUNBUFFERED'] = '1'
  if preload:
    env['LD_PRELOAD'] = loopback.preload_value(env.get('LD_PRELOAD', ''),
                                               preload)
  return env
