"""The sweep's own Ray instance, which Ray Tune's trials run in, closed to
everyone but this user.

A sweep's points are Tune trials (runner.py); Tune needs a Ray instance to
run them in, and the sweep starts one on this host for its own use, however
the points' programs run (on this host, or with --launch_type=ray on a
cluster the user started: that is a different Ray, which each point's
launcher joins by itself). Its trials only supervise: one trial is one
child launcher, on the cores of its slot.

A Ray instance listens: its GCS, raylet, object manager, workers and their
agents serve gRPC on TCP ports, and a plain `ray start --head` lets another
local user in (tried: a process of uid 65534 ran a task as the user who
started Ray, through the Ray Client port). This one is closed two ways:
- no Ray Client server, no dashboard and no job server are started
  (`ray.init` starts no client server; `include_dashboard=False`);
- every process of it is preloaded with the loopback shim
  (run/loopback.py) in its cluster mode: Ray dials this host's own address
  (it turns 127.0.0.1 into it), so its wildcard binds land on that address
  only, and the shim's list of other hosts is empty: a connection from
  another machine is closed unseen, one from this host reaches Ray only
  when it belongs to this user.
Ray's token authentication is left as this process has it (Ray reads
RAY_AUTH_MODE once, when it is first imported, and the sweep launcher of a
--launch_type=ray sweep has imported it to join the user's cluster): the
instance's processes and this driver must agree on it. Seen here: Ray's
first local instance writes ~/.ray/auth_token, and an instance started
where that file exists asks every client for it.
Its session files (sockets, logs) are in a private folder of the sweep's,
not in the shared /tmp/ray, and are removed when the sweep ends: Ray makes
its own temp folder writable by everyone ("so others can use it"), so that
folder is `ray/` inside one of ours that only this user may enter. Its
processes die with the sweep launcher (Ray's fate sharing), even on
`kill -9`; the folder such a launcher leaves is removed by the next sweep
of the same user (`remove_abandoned`: its `pid` file names a process that
is gone). Its workers run at the launcher's niceness (Ray's default is 15,
which the trials' child launchers and their nodes would inherit).

Ray's usage statistics are off (RAY_USAGE_STATS_ENABLED=0): nothing leaves
this host. The processes of the instance get this launcher's environment
less its credentials (credentials.node_environ), Ray's own token settings
(RAY_AUTH_*) kept; a child launcher gets the
launcher's whole environment, handed to its trial as a value, not inherited
through Ray.
"""

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Dict, Iterator

from acme_launch import credentials
from acme_launch.run import loopback


@dataclasses.dataclass(frozen=True)
class LocalRay:
  folder: str                     # Private: session files, locks.
  start_seconds: float            # What ray.init took here.
  screened: bool                  # The loopback shim is preloaded.


def _ray_environ(folder: str, shim: str, address: str) -> Dict[str, str]:
  """The environment Ray's processes start with."""
  env = credentials.node_environ(os.environ, ())
  # Ray's own token settings stay (RAY_AUTH_TOKEN_PATH is named like a
  # credential): the instance must ask the token this process will send.
  env.update({k: v for k, v in os.environ.items() if k.startswith('RAY_AUTH_')})
  env.pop('RAY_ADDRESS', None)    # A cluster's: not the one started here.
  env.update(RAY_USAGE_STATS_ENABLED='0',
             # Tune's trials are supervisors: no per-report files of its own
             # (the run directories hold the metrics), no syncing.
             TUNE_DISABLE_AUTO_CALLBACK_LOGGERS='1',
             TUNE_DISABLE_SIGINT_HANDLER='1',
             # A trial reports its evaluation return once there is one; a
             # scheduler judges the results that have it (schedulers.py).
             TUNE_DISABLE_STRICT_METRIC_CHECKING='1',
             # Tune's own tables of results stay off the terminal: the
             # sweep prints its lines (runner.py).
             RAY_AIR_NEW_OUTPUT='0',
             # Ray starts workers at niceness 15, which a trial's child
             # launcher and its nodes would inherit (and a user could not
             # undo): they run at the launcher's own.
             RAY_worker_niceness='0')
  if shim:
    env['LD_PRELOAD'] = loopback.preload_value(env.get('LD_PRELOAD', ''),
                                               shim)
    if address:  # Else loopback: wildcard binds land there, as for nodes.
      env[loopback.BIND_ADDRESS_ENV] = address
      env[loopback.HOSTS_FILE_ENV] = os.path.join(folder, 'hosts')
      loopback.write_hosts(env[loopback.HOSTS_FILE_ENV], [])
  return env


def _forget_joined_cluster() -> None:
  """Drops what Ray kept in this process from a cluster it joined and left
  (a --launch_type=ray sweep checks its points on the user's cluster
  first): that cluster's system config and its cached token. Kept, a local
  instance started next refuses this process's own calls (seen: "Failed to
  start GCS ... InvalidAuthToken"). Ray's own tests reset the same two."""
  try:
    from ray._raylet import AuthenticationTokenLoader, Config
  except ImportError:
    return
  Config.initialize('')
  AuthenticationTokenLoader.instance().reset_cache()


def _node_address() -> str:
  """The address Ray's processes will dial here ('' for loopback)."""
  from ray._private import services
  address = services.get_node_ip_address()
  return '' if address.startswith('127.') or address == '::1' else address


PREFIX = 'acme-ray-'


def remove_abandoned(parent: str) -> None:
  """Removes this user's instance folders under `parent` whose sweep
  launcher is gone (a `kill -9` leaves its folder behind: nothing of it
  runs any more, Ray's processes died with the launcher)."""
  try:
    names = os.listdir(parent)
  except OSError:
    return
  for name in names:
    path = os.path.join(parent, name)
    if not name.startswith(PREFIX) or os.path.islink(path):
      continue
    try:
      if os.lstat(path).st_uid != os.getuid():
        continue
      with open(os.path.join(path, 'pid')) as f:
        os.kill(int(f.read().strip()), 0)
    except ProcessLookupError:
      shutil.rmtree(path, ignore_errors=True)
    except (OSError, ValueError):
      continue  # Not ours to judge: no readable pid file, or alive.


@contextlib.contextmanager
def started(num_trials: int) -> Iterator[LocalRay]:
  """A local Ray instance with room for `num_trials` trials at once (a CPU
  each, in Ray's accounting), stopped and its folder removed on exit."""
  remove_abandoned(tempfile.gettempdir())
  folder = tempfile.mkdtemp(prefix=PREFIX)  # 0700; short socket paths.
  with open(os.path.join(folder, 'pid'), 'w') as f:
    f.write(str(os.getpid()))
  address = _node_address()
  try:
    shim = loopback.ensure(address)
  except loopback.Unavailable:
    # The points were accepted (prepare.py) where no other machine can
    # reach a listener, or under --allow_exposed_listeners.
    shim = ''
  saved = dict(os.environ)
  import ray
  began = time.monotonic()
  try:
    os.environ.clear()
    os.environ.update(_ray_environ(folder, shim, address))
    _forget_joined_cluster()
    ray.init(num_cpus=num_trials, num_gpus=0, include_dashboard=False,
             _temp_dir=os.path.join(folder, 'ray'),
             logging_level=logging.ERROR, log_to_driver=False,
             configure_logging=True)
    # This process keeps Tune's settings, not the instance's preload:
    # children get `saved`.
    keep = {k: os.environ[k] for k in (
        'RAY_USAGE_STATS_ENABLED', 'TUNE_DISABLE_AUTO_CALLBACK_LOGGERS',
        'TUNE_DISABLE_SIGINT_HANDLER', 'TUNE_DISABLE_STRICT_METRIC_CHECKING',
        'RAY_AIR_NEW_OUTPUT')}
  except BaseException:
    ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)
    raise
  finally:
    os.environ.clear()
    os.environ.update(saved)
  os.environ.update(keep)
  try:
    yield LocalRay(folder, time.monotonic() - began, bool(shim))
  finally:
    try:
      ray.shutdown()
    finally:
      for key in keep:
        if key in saved:
          os.environ[key] = saved[key]
        else:
          os.environ.pop(key, None)
      shutil.rmtree(folder, ignore_errors=True)
      sys.stdout.flush()
