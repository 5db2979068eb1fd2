"""The loopback shim alone (acme_launch/run/loopback.py): its accept() answers
only the server's own user.

A small Python server with the shim preloaded listens on wildcard addresses
(IPv4, dual-stack IPv6, IPv6-only) and on an abstract Unix socket, blocking
and non-blocking, and answers each connection it accepts with b'hello'. Clients run as the
server's user, as another user (`nobody`) and, for a server of an ordinary
user, as root. Runs as root (setpriv); skipped elsewhere. The runs behind it,
against real nodes: tests/e2e/run/test_loopback.py.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from acme_launch.run import loopback
from acme_launch.testing import two_hosts
from tests import other_user
from tests.conftest import REPO_ROOT

_SERVER = r'''
import json, os, select, socket, time
listeners = {}
def listen(name, family, address, v6only=None, blocking=False):
  s = socket.socket(family, socket.SOCK_STREAM)
  if v6only is not None:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6only)
  s.bind(address)
  s.listen(16)
  s.setblocking(blocking)
  listeners[name] = s
# Blocking listeners see a refusal as ConnectionAbortedError; non-blocking
# ones (as gRPC's) as an empty queue.
listen('v4', socket.AF_INET, ('0.0.0.0', 0), blocking=True)
listen('dual', socket.AF_INET6, ('::', 0), 0)
try:
  listen('v6', socket.AF_INET6, ('::', 0), 1)
except OSError:
  pass
unix_name = 'acme-launch-shim-test-%d' % os.getpid()
listen('unix', socket.AF_UNIX, '\0' + unix_name, blocking=True)
print(json.dumps({'unix': unix_name, **{
    n: list(s.getsockname()[:2]) for n, s in listeners.items() if n != 'unix'}}),
    flush=True)
while True:
  ready, _, _ = select.select(list(listeners.values()), [], [])
  time.sleep(0.3)  # A client that sends and closes at once is gone by now.
  for s in ready:
    name = next(n for n, l in listeners.items() if l is s)
    try:
      conn, _ = s.accept()
    except ConnectionAbortedError:
      print(json.dumps({'refused': name}), flush=True)
      continue
    except BlockingIOError:
      continue
    conn.settimeout(2)
    try:
      data = conn.recv(64)
      conn.sendall(b'hello')
    except OSError:
      data = b''
    conn.close()
    print(json.dumps({'listener': name, 'data': data.decode('latin1')}),
          flush=True)
'''

_CLIENT = r'''
import json, os, socket, sys
targets = json.loads(sys.argv[1])
uid = os.geteuid()
answers = {}
def attempt(name, family, address, wait=True):
  try:
    with socket.socket(family, socket.SOCK_STREAM) as s:
      s.settimeout(5)
      s.connect(address)
      s.sendall(b'from-%d-%s' % (uid, name.encode()))
      answers[name] = s.recv(64).decode('latin1') if wait else ''
  except OSError as e:
    answers[name] = type(e).__name__
attempt('v4', socket.AF_INET, ('127.0.0.1', targets['v4'][1]))
attempt('dual_from_v4', socket.AF_INET, ('127.0.0.1', targets['dual'][1]))
attempt('dual_from_dual', socket.AF_INET6, ('::ffff:127.0.0.1', targets['dual'][1]))
if 'v6' in targets:
  attempt('v6', socket.AF_INET6, ('::1', targets['v6'][1]))
attempt('unix', socket.AF_UNIX, '\0' + targets['unix'])
attempt('orphan', socket.AF_INET, ('127.0.0.1', targets['v4'][1]), wait=False)
print(json.dumps(answers))
'''


@pytest.fixture(scope='module')
def shim():
  why = other_user.why_not()
  if why:
    pytest.skip(why)
  return loopback.ensure()


@pytest.fixture
def scratch():
  """A folder every user may enter, for their homes (root's views too)."""
  path = other_user.shared_folder()
  yield path
  shutil.rmtree(path, ignore_errors=True)


class _Server:
  """The server above, as `uid`, with the shim (and `env`)."""

  def __init__(self, shim_path, uid, scratch, env=None):
    self.home = other_user.home_of(uid, scratch)
    self.process = subprocess.Popen(
        other_user.command(uid, [sys.executable, '-S', '-c', _SERVER], scratch),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=other_user.environment(self.home, {
            'LD_PRELOAD': shim_path, 'ACME_LAUNCH_LOOPBACK_DEBUG': '1',
            **(env or {})}))
    self.targets = json.loads(self.process.stdout.readline())
    self.stderr = ''

  def client(self, uid, scratch):
    """What a client as `uid` read from each listener ('hello': answered)."""
    result = subprocess.run(
        other_user.command(uid, [sys.executable, '-S', '-c', _CLIENT,
                                 json.dumps(self.targets)], scratch),
        capture_output=True, text=True, timeout=120, check=True,
        env=other_user.environment(other_user.home_of(uid, scratch)))
    return json.loads(result.stdout)

  def stop(self):
    """Everything the server logged: a dict per connection accepted or
    refused (the shim's own lines in self.stderr)."""
    self.process.send_signal(signal.SIGTERM)
    out, self.stderr = self.process.communicate(timeout=30)
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize('lookup', ['sock_diag', '/proc/net/tcp'])
@pytest.mark.parametrize('server_uid', [0, other_user.ORDINARY])
def test_only_connections_of_the_servers_user_are_answered(shim, scratch,
                                                           server_uid, lookup):
  env = {'ACME_LAUNCH_LOOPBACK_LOOKUP': 'proc'} if lookup.startswith('/') else {}
  server = _Server(shim, server_uid, scratch, env)
  try:
    intruder = server.client(other_user.NOBODY, scratch)
    owner = server.client(server_uid, scratch)   # After the refusals.
    root = server.client(0, scratch) if server_uid else None
  finally:
    log = server.stop()
  assert all(answer != 'hello' for answer in intruder.values()), intruder
  expected = {name: 'hello' for name in owner if name != 'orphan'}
  assert {k: v for k, v in owner.items() if k != 'orphan'} == expected, owner
  assert len(expected) >= 5, owner  # v4, both ways to dual, v6 if any, unix.
  if root is not None:  # Root's sockets are not the run's user's either.
    assert all(answer != 'hello' for answer in root.values()), root
  # Nothing another user sent reached the server, what it sent and closed
  # before the server accepted (`orphan`) included.
  received = [entry['data'] for entry in log if 'data' in entry]
  assert not any(d.startswith(f'from-{other_user.NOBODY}-') for d in received), log
  assert any(d.startswith(f'from-{server_uid}-') for d in received), log
  if server_uid:
    assert not any(d.startswith('from-0-') for d in received), log
  refused = [entry['refused'] for entry in log if 'refused' in entry]
  assert refused.count('v4') >= 2 and refused.count('unix') >= 1, log
  # Each refusal in the shim's words, by the lookup asked for.
  said = [l for l in server.stderr.splitlines() if 'refused a connection' in l]
  assert any(f'from uid {other_user.NOBODY} ' in l and f'; {lookup})' in l
             for l in said), server.stderr
  assert not any('; /proc' in l for l in said) or lookup.startswith('/'), said


_HOST_CLIENT = r'''
import json, socket, sys
port, sources = int(sys.argv[1]), sys.argv[2].split(',')
answers = {}
for source in sources:
  try:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
      s.settimeout(3)
      s.bind((source, 0))
      s.connect(('10.9.0.1', port))
      answers[source] = s.recv(64).decode() or 'closed'
  except OSError as e:
    answers[source] = type(e).__name__
print(json.dumps(answers))
'''


@pytest.fixture
def host_addresses():
  """A network namespace whose one interface (a veth, its peer beside it)
  holds 10.9.0.1 (the server's cluster address), .2 and .3 (stand-ins for other hosts: a connection
  from them is not this host's in the shim's eyes)."""
  namespace = f'acl_shim_{os.getpid()}'
  subprocess.run(['ip', 'netns', 'add', namespace], check=True)
  try:
    for step in (['ip', 'link', 'add', 'd0', 'type', 'veth', 'peer', 'd1'],
                 ['ip', 'link', 'set', 'd0', 'up'],
                 ['ip', 'link', 'set', 'lo', 'up'],
                 *(['ip', 'addr', 'add', f'10.9.0.{i}/24', 'dev', 'd0']
                   for i in (1, 2, 3))):
      subprocess.run(['ip', 'netns', 'exec', namespace, *step], check=True)
    yield ['ip', 'netns', 'exec', namespace]
  finally:
    subprocess.run(['ip', 'netns', 'del', namespace], check=False)


def test_a_cluster_address_answers_the_runs_hosts_and_its_own_user_only(
    shim, scratch, host_addresses, tmp_path):
  # A Ray node's peers on other hosts cannot be looked up by user: the shim
  # admits the hosts in the launcher's file, read anew at each connection.
  hosts = str(tmp_path / 'hosts')
  loopback.write_hosts(hosts, ['10.9.0.2'])
  server = subprocess.Popen(
      [*host_addresses, sys.executable, '-S', '-c',
       two_hosts.ANSWERING_SERVER, '0', 'hello'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, LD_PRELOAD=shim, ACME_LAUNCH_LOOPBACK_DEBUG='1',
               **{loopback.BIND_ADDRESS_ENV: '10.9.0.1',
                  loopback.HOSTS_FILE_ENV: hosts}))

  def clients(uid, sources):
    argv = [sys.executable, '-S', '-c', _HOST_CLIENT, port, sources]
    if uid:
      argv = other_user.command(uid, argv, scratch)
    result = subprocess.run([*host_addresses, *argv], capture_output=True,
                            text=True, timeout=60, check=True)
    return json.loads(result.stdout)

  try:
    address, port = server.stdout.readline().split()
    assert address == '::ffff:10.9.0.1'
    listed = clients(0, '10.9.0.2,10.9.0.3,10.9.0.1')
    nobody = clients(other_user.NOBODY, '10.9.0.1,10.9.0.2')
    loopback.write_hosts(hosts, ['10.9.0.3'])  # A node moved to .3.
    moved = clients(0, '10.9.0.2,10.9.0.3')
    os.unlink(hosts)
    no_list = clients(0, '10.9.0.3,10.9.0.1')
  finally:
    server.kill()
    stderr = server.communicate(timeout=30)[1]
  # A listed host, and this host's own user: answered; an unlisted host,
  # and another user of this host: closed unanswered.
  assert listed == {'10.9.0.2': 'hello', '10.9.0.3': 'closed',
                    '10.9.0.1': 'hello'}, (listed, stderr)
  # From a listed host every user gets in: its users are not known here.
  assert nobody == {'10.9.0.1': 'closed', '10.9.0.2': 'hello'}, nobody
  assert moved == {'10.9.0.2': 'closed', '10.9.0.3': 'hello'}, moved
  assert no_list == {'10.9.0.3': 'closed', '10.9.0.1': 'hello'}, no_list
  assert 'refused a connection from 10.9.0.3 (not a host of the run)' in stderr
  assert f'refused a connection from uid {other_user.NOBODY} ' in stderr


def test_a_cluster_address_without_a_hosts_file_is_not_screened(shim, scratch):
  server = _Server(shim, 0, scratch, env={loopback.BIND_ADDRESS_ENV: '127.0.0.1'})
  try:
    intruder = server.client(other_user.NOBODY, scratch)
  finally:
    server.stop()
  assert intruder['v4'] == 'hello', intruder


def test_the_launchers_check_proves_the_screening(shim):
  loopback.verify(shim)                # Binds on loopback, own user accepted.
  loopback.verify(shim, '127.0.0.1')   # A cluster address: by host.


def test_a_shim_built_under_the_launchers_umask_is_current_for_other_users(
    shim, scratch):
  # The launcher runs with umask 077; a shared environment's shim it built
  # must still read as current to the other users of that environment.
  path = os.path.join(scratch, 'shared-env', 'acme_launch_loopback.so')
  os.makedirs(os.path.dirname(path), mode=0o755)
  previous = os.umask(0o077)
  try:
    loopback.build(path)
  finally:
    os.umask(previous)
  check = ('import sys; from acme_launch.run import loopback; '
           f'print(loopback.is_current({path!r}))')
  result = subprocess.run(
      other_user.command(other_user.NOBODY, [sys.executable, '-c', check],
                         scratch),
      capture_output=True, text=True, timeout=120, check=True, cwd=REPO_ROOT,
      env=other_user.environment(other_user.home_of(other_user.NOBODY,
                                                    scratch)))
  assert result.stdout.strip() == 'True', result.stderr[-2000:]
