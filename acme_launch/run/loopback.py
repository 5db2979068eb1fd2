"""Keeps the servers of a local run on loopback, answering only the run's
user: the LD_PRELOAD bind()/accept() shim.

Courier (Launchpad 0.5.0) and Reverb (0.7.0) servers bind the wildcard
`[::]:PORT` in C++ and take only a port, so every node of a local run would
listen on every network interface, and Courier serves pickled Python calls
without credentials (its decoder imports and calls whatever a request's
"reduced" objects name). `native/loopback_bind.c` is a tiny library that
wraps glibc's `bind()` (both libraries call it dynamically) and rewrites a
wildcard address to loopback: 0.0.0.0 -> 127.0.0.1, [::] on an IPv6-only
socket -> [::1], [::] on a dual-stack socket -> ::ffff:127.0.0.1 (IPv4
loopback, where `localhost` resolves; a client that tries ::1 first is
refused at once and moves on to 127.0.0.1). Outbound connections are
untouched.

Loopback keeps other machines out, not other users of this one. The library
also wraps `accept()` and `accept4()` (gRPC's accept loop calls glibc's
`accept4`): a connection reaches the server only when the peer's socket
belongs to the process's effective user, looked up by its address and port
(NETLINK_SOCK_DIAG, or /proc/net/tcp and /proc/net/tcp6 where that is not
available; SO_PEERCRED for Unix sockets). Any other is closed before
the server sees it: the other user's client reads nothing, and the server
keeps listening (a non-blocking accept goes on to the next pending
connection, a blocking one fails with ECONNABORTED, a client that gave up).
Why this and not a network namespace of the run:
docs/reliability-and-security.md ("Threat model").

On a Ray cluster (`--launch_type=ray`) ACME_LAUNCH_BIND_ADDRESS names the
host's cluster address (IPv4; the shim takes IPv6 too, though the Ray
launcher uses IPv4 hosts only) and wildcard binds land there instead of on
loopback: the other hosts reach the node, nothing listens on any other
interface (acme_launch/run/ray/launch.py sets it per node). The users of
other hosts cannot be looked up, so there accept screens by host:
ACME_LAUNCH_HOSTS_FILE names a file listing the run's hosts (`write_hosts`;
run/ray/host.py keeps one per node and the launcher rewrites it when a node
moves), and a connection from any other machine of the cluster network is
closed unseen; one from this host is screened by its user as on loopback.
Local runs never carry either variable (`clear_bind_address`).

A local_mp run given --run_key=all also hands each node the run's key by
its path (RUN_KEY_ENV) and the run's ports (RUN_PORTS_ENV): then a
connection to one of those ports on loopback proves the key as one between
hosts does, after the check by user, so a process of the run's own user
without the key is refused too (run/local_mp/launch.py).

The library is built with the system C compiler into the virtual environment
(`<sys.prefix>/lib/acme_launch_loopback.so`, or ACME_LAUNCH_LOOPBACK_LIBRARY)
by scripts/setup.sh, and again by the launcher whenever its source changed.
The supervisor preloads it into every `local_mp` node process; for
`local_mt`/`test_mt`, where the servers are threads of the launcher, the
launcher re-executes itself once with it preloaded. Before a run starts the
launcher checks, in a throwaway process, that a wildcard bind really lands on
loopback and that a connection of its own user is accepted there; when it
does not (no compiler, a static interpreter, no /proc...) the CLI refuses
the run unless `--allow_exposed_listeners` is given, or the launcher runs in
a network namespace with no interface but loopback (no other machine to
expose to there: `docker run --network none`, `unshare -n`).

This module imports nothing from acme_launch, so that setup can run it as a
script before anything else is importable:

    python acme_launch/run/loopback.py           # build if missing or stale
    python acme_launch/run/loopback.py --check   # also prove it works; exit 1 if not
"""

import ctypes
import errno
import hashlib
import json
import os
import secrets
import socket
import stat
import subprocess
import sys
import tempfile

_NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'native')
SOURCE = os.path.join(_NATIVE, 'loopback_bind.c')
# The handshake's MAC, apart from the socket code (compiled in with it).
_SOURCES = (SOURCE, *(os.path.join(_NATIVE, name) for name in (
    'handshake.c', 'handshake.h', 'hmac_sha256.c', 'hmac_sha256.h')))
LIBRARY_ENV = 'ACME_LAUNCH_LOOPBACK_LIBRARY'
BIND_ADDRESS_ENV = 'ACME_LAUNCH_BIND_ADDRESS'  # Read by the shim at load.
HOSTS_FILE_ENV = 'ACME_LAUNCH_HOSTS_FILE'      # Read by the shim at accept.
# The run's key (native/handshake.c): its path in the environment, never
# the key; the file holds exactly RUN_KEY_SIZE random bytes, this user's,
# mode 0600. Read by the shim at load, on a cluster address only.
RUN_KEY_ENV = 'ACME_LAUNCH_RUN_KEY_FILE'
RUN_KEY_SIZE = 32
# --run_key=all under local_mp: the run's ports on loopback, comma-separated
# (read by the shim at load with RUN_KEY_ENV): connections to them prove the
# key too; without it a local run's shim ignores RUN_KEY_ENV.
RUN_PORTS_ENV = 'ACME_LAUNCH_RUN_PORTS'
# What the shim reads once, when it loads: a process forked from one that
# loaded it (a fork server's node) has its parent's values, whatever its
# own environment says (run/forkserver.py compares them).
SHIM_LOAD_ENV = (BIND_ADDRESS_ENV, HOSTS_FILE_ENV, RUN_KEY_ENV, RUN_PORTS_ENV)
# acme_launch_peer_check's values: how the shim screens accept().
NOT_SCREENED, BY_USER, BY_USER_AND_HOST = 0, 1, 2
_REEXEC_ENV = 'ACME_LAUNCH_LOOPBACK_REEXEC'
_ACTIVE_SYMBOL = 'acme_launch_loopback_active'
_SCREENING_SYMBOL = 'acme_launch_peer_check'

# Run with the shim preloaded: binds wildcards, prints where they landed,
# whether a connection of this user is accepted there, and how accept is
# screened (the library's acme_launch_peer_check).
_PROBE = r'''
import ctypes, json, socket
found = {'addresses': [], 'accepted': True}
def served(family, address):
  listener = socket.socket(family, socket.SOCK_STREAM)
  if family == socket.AF_INET6:
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
  listener.bind((address, 0))
  found['addresses'].append(listener.getsockname()[0])
  listener.listen(1)
  host, port = listener.getsockname()[:2]
  client = socket.create_connection((host.replace('::ffff:', ''), port), 10)
  listener.settimeout(10)
  try:
    listener.accept()[0].close()
  except OSError:
    found['accepted'] = False
  client.close()
  listener.close()
served(socket.AF_INET, '0.0.0.0')
if socket.has_ipv6:
  try:
    served(socket.AF_INET6, '::')
  except OSError:
    pass
try:
  found['screened'] = ctypes.c_int.in_dll(ctypes.CDLL(None),
                                         'acme_launch_peer_check').value
except ValueError:
  found['screened'] = 0
print(json.dumps(found))
'''
_LOOPBACK = ('127.0.0.1', '::1', '::ffff:127.0.0.1')


class Unavailable(Exception):
  """The shim cannot be built or does not work here; the message says why."""


def library_path() -> str:
  return os.environ.get(LIBRARY_ENV) or os.path.join(
      sys.prefix, 'lib', 'acme_launch_loopback.so')


def _source_digest() -> str:
  digest = hashlib.sha256()
  for path in _SOURCES:
    with open(path, 'rb') as f:
      digest.update(f.read())
  return digest.hexdigest()


def _stamp_path(path: str) -> str:
  return path + '.sha256'


def is_current(path: str) -> bool:
  """True when `path` exists and was built from the present source."""
  try:
    with open(_stamp_path(path)) as f:
      return os.path.isfile(path) and f.read().strip() == _source_digest()
  except OSError:
    return False


def build(path: str) -> None:
  """Compiles the shim to `path` (atomically); Unavailable on failure."""
  compiler = os.environ.get('CC', 'cc')
  directory = os.path.dirname(path) or '.'
  try:
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix='.loopback-',
                                    suffix='.so')
    os.close(fd)
  except OSError as e:
    raise Unavailable(f'cannot write the loopback shim to {path}: '
                      f'{e.strerror}') from None
  try:
    try:
      result = subprocess.run(
          [compiler, '-shared', '-fPIC', '-O2', '-Wall', '-o', tmp_path,
           *(p for p in _SOURCES if p.endswith('.c')), '-ldl', '-pthread'],
          capture_output=True, text=True, timeout=120, check=False)
    except OSError as e:
      raise Unavailable(f'cannot build the loopback shim: no C compiler '
                        f'({compiler}: {e.strerror})') from None
    if result.returncode != 0:
      first = (result.stderr.strip().splitlines() or ['no output'])[0]
      raise Unavailable(f'cannot build the loopback shim with {compiler}: '
                        f'{first[:200]}')
    # Both readable by every user of the environment, whatever the umask
    # (the launcher's is 077): a stamp only its builder could read would
    # make every other user's launcher rebuild, and fail to write, the shim.
    os.chmod(tmp_path, 0o755)
    os.replace(tmp_path, path)
    with open(_stamp_path(path) + '.tmp', 'w') as f:
      f.write(_source_digest() + '\n')
      os.fchmod(f.fileno(), 0o644)
    os.replace(_stamp_path(path) + '.tmp', _stamp_path(path))
  except OSError as e:
    raise Unavailable(f'cannot write the loopback shim to {path}: '
                      f'{e.strerror}') from None
  finally:
    if os.path.exists(tmp_path):
      os.unlink(tmp_path)


def preload_value(existing: str, path: str) -> str:
  """LD_PRELOAD with `path` first, keeping what was already preloaded."""
  others = [p for p in (existing or '').replace(':', ' ').split()
            if p and p != path]
  return ' '.join([path] + others)


def write_hosts(path: str, addresses) -> None:
  """The shim's hosts file at `path`: `addresses` (IPv4 or IPv6), one per line,
  replaced at once (a node's shim never reads half a list), private."""
  tmp_path = f'{path}.{os.getpid()}.tmp'
  with open(os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                    os.O_NOFOLLOW, 0o600), 'w') as f:
    f.write(''.join(f'{a}\n' for a in addresses))
  os.replace(tmp_path, path)


def run_key_path(run_dir: str) -> str:
  """Where a run keeps its key: in its own directory, so that --resume of
  that run (and only of it) uses it again."""
  return os.path.join(run_dir, '.run_key')


def write_run_key(path: str, key: bytes) -> None:
  """`key` at `path` (a node's copy, on its host), replaced whole, mode 0600,
  never through a link."""
  tmp_path = f'{path}.{os.getpid()}.tmp'
  fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
               0o600)
  try:
    os.write(fd, key)
  finally:
    os.close(fd)
  os.replace(tmp_path, path)


def run_key_of(run_dir: str) -> bytes:
  """The run's key: the one in its directory (a resumed run's), else a
  fresh random one made there; ValueError when the file there cannot be
  used (its one line names it)."""
  path = run_key_path(run_dir)
  try:
    make_run_key(path)
  except FileExistsError:
    pass  # Also a link there: refused by read_run_key.
  except OSError as e:
    raise ValueError(f'the run key file {path} cannot be made: '
                     f'{e.strerror}') from None
  return read_run_key(path)


def make_run_key(path: str) -> None:
  """A fresh random run key at `path`, made exclusively (never through a
  link, never over another file), readable by this user only."""
  fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
               0o600)
  try:
    os.write(fd, secrets.token_bytes(RUN_KEY_SIZE))
  finally:
    os.close(fd)


def run_key_problem(path: str) -> str:
  """'' when `path` is a usable run key (the shim's rules, handshake.c:
  a regular file of this user, readable by no one else, RUN_KEY_SIZE bytes,
  not a link); else why not, in words."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
  except FileNotFoundError:
    return 'it does not exist'
  except OSError as e:
    return 'it is a link' if e.errno == errno.ELOOP else 'it cannot be read'
  try:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
      return 'it is not a regular file'
    if st.st_uid != os.geteuid():
      return 'it belongs to another user'
    if st.st_mode & 0o077:
      return 'others can read or change it (chmod 600)'
    if st.st_size != RUN_KEY_SIZE:
      return f'it is not {RUN_KEY_SIZE} bytes'
    return ''
  finally:
    os.close(fd)


def read_run_key(path: str) -> bytes:
  """The key at `path`, checked as the shim checks it; ValueError naming
  the file and what is wrong with it."""
  problem = run_key_problem(path)
  if problem:
    raise ValueError(f'the run key file {path} cannot be used: {problem}')
  with open(path, 'rb') as f:
    return f.read()


def verify(path: str, bind_address: str = '') -> None:
  """Proves, in a throwaway process, that wildcard binds land on loopback,
  that a connection of this user is accepted there, and that accept is
  screened (connections of other users refused).

  With `bind_address` (an IPv4 address of this host), that they land there
  and that accept screens by host (a cluster's listener, with a hosts file)
  while a connection of this user from this host is accepted.
  """
  env = clear_bind_address(dict(
      os.environ, LD_PRELOAD=preload_value(os.environ.get('LD_PRELOAD'), path)))
  env.pop('ACME_LAUNCH_LOOPBACK_DEBUG', None)
  expected, screened = _LOOPBACK, BY_USER
  with tempfile.TemporaryDirectory(prefix='acme-launch-shim-') as folder:
    if bind_address:
      env[BIND_ADDRESS_ENV] = bind_address
      env[HOSTS_FILE_ENV] = os.path.join(folder, 'hosts')
      write_hosts(env[HOSTS_FILE_ENV], [])  # No other host: this one only.
      expected = (bind_address, '::ffff:' + bind_address)
      screened = BY_USER_AND_HOST
    try:
      result = subprocess.run([sys.executable, '-S', '-c', _PROBE], env=env,
                              capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
      raise Unavailable(f'cannot run the loopback shim check: {e}') from None
  try:
    found = json.loads(result.stdout.strip().splitlines()[-1])
  except (IndexError, ValueError):
    found = {}
  addresses = found.get('addresses', [])
  detail = ''
  if result.returncode != 0 or not addresses:
    detail = ' '.join(result.stderr.split())[:200] or 'the check printed nothing'
  elif any(a not in expected for a in addresses):
    detail = 'a wildcard bind landed on ' + ', '.join(addresses)
  elif not found.get('accepted'):
    detail = ('it refused a connection of this user (can it ask '
              'NETLINK_SOCK_DIAG or read /proc/net/tcp?)')
  elif found.get('screened') != screened:
    detail = ('it does not screen connections' if not bind_address else
              'it does not screen connections by host on a cluster address')
  if detail:
    raise Unavailable(f'the loopback shim {path} does not work here: {detail}')


def ensure(bind_address: str = '') -> str:
  """The shim's path, built if missing or stale and checked; Unavailable."""
  path = library_path()
  if not is_current(path):
    build(path)
  verify(path, bind_address)
  return path


def only_loopback_interfaces() -> bool:
  """True in a network namespace whose only interface is loopback.

  There (`docker run --network none`, `unshare -n`) no listener can be
  reached from another machine, with or without the shim.
  """
  try:
    return all(name == 'lo' for _, name in socket.if_nameindex())
  except OSError:
    return False


def _symbol_in_this_process(name: str):
  try:
    return ctypes.c_int.in_dll(ctypes.CDLL(None), name).value
  except ValueError:
    return None


def active_in_this_process() -> bool:
  """True when the shim was preloaded into this process."""
  return _symbol_in_this_process(_ACTIVE_SYMBOL) is not None


def screening_in_this_process() -> bool:
  """True when this process's listeners answer only its own user: the shim
  is preloaded and screens accept by user (no cluster bind address)."""
  return _symbol_in_this_process(_SCREENING_SYMBOL) == BY_USER


def clear_bind_address(env: dict) -> dict:
  """`env` without a cluster bind address nor a run key: a local run's
  processes bind to loopback and screen their peers by user, whatever the
  user's environment held."""
  for name in (BIND_ADDRESS_ENV, HOSTS_FILE_ENV, RUN_KEY_ENV, RUN_PORTS_ENV):
    env.pop(name, None)
  return env


def reexec_preloaded() -> None:
  """Re-executes this process with the shim preloaded, once.

  For `local_mt`/`test_mt`, whose servers are threads of the launcher: a
  library must be preloaded when the process starts. Returns (and leaves the
  decision to the caller, see `active_in_this_process`) when the shim is
  already loaded, unavailable, or this process is the re-executed one.
  """
  if active_in_this_process() or os.environ.get(_REEXEC_ENV):
    return
  try:
    path = ensure()
  except Unavailable:
    return
  env = clear_bind_address(dict(
      os.environ, LD_PRELOAD=preload_value(os.environ.get('LD_PRELOAD'), path)))
  env[_REEXEC_ENV] = '1'
  sys.stdout.flush()
  sys.stderr.flush()
  os.execve(sys.executable, sys.orig_argv, env)


def main(argv) -> int:
  path = library_path()
  try:
    if not is_current(path):
      build(path)
      print(f'acme-launch: built the loopback shim {path}', file=sys.stderr)
    if '--check' in argv:
      verify(path)
  except Unavailable as e:
    print(f'acme-launch: warning: {e}; local runs will be refused unless '
          'given --allow_exposed_listeners', file=sys.stderr)
    return 1 if '--check' in argv else 0
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
