"""The shim's HMAC-SHA-256 (acme_launch/run/native/hmac_sha256.c), which
proves a connection between hosts belongs to the run: RFC 4231's test
vectors, and Python's hmac module on random keys and messages of every
length around SHA-256's 64-byte block.
"""

import ctypes
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acme_launch.run import loopback
from acme_launch.testing import cluster
from acme_launch.testing import two_hosts as two_hosts_lib
from tests import other_user

# RFC 4231, section 4: (key, data, HMAC-SHA-256); case 5's is truncated to
# 128 bits in the RFC.
_RFC_4231 = [
    (b'\x0b' * 20, b'Hi There',
     'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7'),
    (b'Jefe', b'what do ya want for nothing?',
     '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843'),
    (b'\xaa' * 20, b'\xdd' * 50,
     '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe'),
    (bytes(range(1, 26)), b'\xcd' * 50,
     '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b'),
    (b'\x0c' * 20, b'Test With Truncation', 'a3b6167473100ee06e0c796c2955552b'),
    (b'\xaa' * 131, b'Test Using Larger Than Block-Size Key - Hash Key First',
     '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54'),
    (b'\xaa' * 131,
     b'This is a test using a larger than block-size key and a larger than '
     b'block-size data. The key needs to be hashed before being used by the '
     b'HMAC algorithm.',
     '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2'),
]


@pytest.fixture(scope='module')
def shim(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('shim') / 'shim.so')
  loopback.build(path)
  return ctypes.CDLL(path)


def _mac(shim, key: bytes, message: bytes) -> bytes:
  out = ctypes.create_string_buffer(32)
  shim.acme_launch_hmac_sha256(key, ctypes.c_size_t(len(key)), message,
                               ctypes.c_size_t(len(message)), out)
  return out.raw


@pytest.mark.parametrize('case', range(1, len(_RFC_4231) + 1))
def test_the_shims_hmac_sha256_gives_rfc_4231s_vectors(shim, case):
  key, data, expected = _RFC_4231[case - 1]
  assert _mac(shim, key, data).hex()[:len(expected)] == expected


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=200), message=st.binary(max_size=300))
def test_the_shims_hmac_sha256_is_pythons(shim, key, message):
  assert _mac(shim, key, message) == hmac.new(key, message,
                                              hashlib.sha256).digest()


def test_the_shims_compare_tells_equal_from_unequal(shim):
  equal = shim.acme_launch_equal
  a = bytes(32)
  for i in range(32):
    b = bytearray(a)
    b[i] = 1
    assert equal(a, bytes(b), ctypes.c_size_t(32)) == 0
  assert equal(a, a, ctypes.c_size_t(32)) == 1


# --- The handshake between two hosts (network namespaces, root) ---------

# Connects to each (address, port) of argv[1] (JSON), blocking or not, and
# says what came back: 'hello', 'closed' or the error's name; and in how
# many seconds.
_CLIENT = r'''
import json, select, socket, sys, time
answers = []
for address, port, blocking in json.loads(sys.argv[1]):
  start = time.time()
  try:
    family = socket.AF_INET6 if ':' in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
      s.settimeout(5)
      if blocking:
        s.connect((address, port))
      else:  # As gRPC: non-blocking, then wait for writability, SO_ERROR.
        s.setblocking(False)
        code = s.connect_ex((address, port))
        if code not in (0, 115):  # 115: EINPROGRESS.
          raise OSError(code, 'connect')
        select.select([], [s], [], 5)
        code = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
          raise OSError(code, 'connect')
        s.setblocking(True)
        s.settimeout(5)
      answer = s.recv(64).decode() or 'closed'
  except OSError as e:
    answer = type(e).__name__
  answers.append([answer, round(time.time() - start, 3)])
print(json.dumps(answers))
'''


@pytest.fixture(scope='module')
def two_hosts():
  """Hosts a (10.9.1.1) and b (10.9.1.2; 10.9.1.3 there is no host of the
  run): acme_launch/testing/two_hosts.py."""
  why = other_user.why_not() or cluster.why_not_available()
  if why:
    pytest.skip(why)
  with two_hosts_lib.two_hosts() as hosts:
    yield hosts


@pytest.fixture(scope='module')
def keyed_shim():
  return loopback.ensure()


def _key(folder, name='key'):
  path = os.path.join(folder, name)
  loopback.make_run_key(path)
  return path


def _shim_env(shim, folder, address, hosts, key):
  """The environment of a node process on `address` of a run on `hosts`."""
  hosts_file = os.path.join(folder, f'hosts-{address}')
  if not os.path.exists(hosts_file):
    loopback.write_hosts(hosts_file, hosts)
  env = dict(os.environ, LD_PRELOAD=shim, ACME_LAUNCH_LOOPBACK_DEBUG='1',
             **{loopback.BIND_ADDRESS_ENV: address,
                loopback.HOSTS_FILE_ENV: hosts_file})
  if key:
    env[loopback.RUN_KEY_ENV] = key
  return env


class _KeyedServer:
  """_SERVER on host a (10.9.1.1) of a run on hosts a and b, with `key`."""

  def __init__(self, hosts, shim, folder, key, port=0):
    self.process = subprocess.Popen(
        [*hosts['a'], sys.executable, '-S', '-c', two_hosts_lib.ANSWERING_SERVER,
         str(port), 'hello'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_shim_env(shim, folder, '10.9.1.1', ['10.9.1.1', '10.9.1.2'], key))
    self.port = int(self.process.stdout.readline().split()[1])
    self.stderr = ''

  def stop(self) -> str:
    self.process.kill()
    self.stderr = self.process.communicate(timeout=30)[1]
    return self.stderr


def _clients(hosts, targets, env=None):
  """_CLIENT from host b: [(answer, seconds)] per (address, port, blocking)."""
  result = subprocess.run(
      [*hosts['b'], sys.executable, '-S', '-c', _CLIENT, json.dumps(targets)],
      capture_output=True, text=True, timeout=120, check=True,
      env=env or dict(os.environ))
  return [tuple(a) for a in json.loads(result.stdout)]


def test_a_client_with_the_run_key_is_answered_across_hosts_and_one_without_is_not(
    two_hosts, keyed_shim, tmp_path):
  key, other_run = _key(str(tmp_path)), _key(str(tmp_path), 'other')
  server = _KeyedServer(two_hosts, keyed_shim, str(tmp_path), key)
  target = [['10.9.1.1', server.port, True], ['10.9.1.1', server.port, False]]
  try:
    with_key = _clients(two_hosts, target, _shim_env(
        keyed_shim, str(tmp_path), '10.9.1.2', ['10.9.1.1', '10.9.1.2'], key))
    wrong_key = _clients(two_hosts, target, _shim_env(
        keyed_shim, str(tmp_path), '10.9.1.2', ['10.9.1.1', '10.9.1.2'],
        other_run))
    # A plain gRPC client's first bytes, HTTP/2's preface (as another user
    # of host b would send), then nothing at all.
    no_shim = _send(two_hosts, server.port, b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')
    silent = _clients(two_hosts, target[:1])
    after = _clients(two_hosts, target[:1], _shim_env(
        keyed_shim, str(tmp_path), '10.9.1.2', ['10.9.1.1', '10.9.1.2'], key))
  finally:
    stderr = server.stop()
  assert [a for a, _ in with_key] == ['hello', 'hello'], (with_key, stderr)
  # Another run's key: refused by the server, unanswered; the client's
  # connect itself fails (the server never proved itself to it).
  assert [a for a, _ in wrong_key] == ['ConnectionRefusedError'] * 2, wrong_key
  # No proof: not one byte back. A silent client is not even accepted.
  assert no_shim == b'', no_shim
  assert silent[0][0] == 'TimeoutError', silent
  assert [a for a, _ in after] == ['hello'], after
  assert 'refused a connection from 10.9.1.2 (wrong proof)' in stderr, stderr
  assert 'refused a connection from 10.9.1.2 (a short proof)' in stderr, stderr


# Run on a host with the shim on an IPv6 cluster address: where an IPv4
# wildcard, a dual-stack [::] and an IPv6-only [::] bind land.
_BINDS = r'''
import json, socket
found = {}
for name, family, address, v6only in (('v4', socket.AF_INET, '0.0.0.0', 0),
                                      ('dual', socket.AF_INET6, '::', 0),
                                      ('v6only', socket.AF_INET6, '::', 1)):
  with socket.socket(family, socket.SOCK_STREAM) as s:
    if family == socket.AF_INET6:
      s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6only)
    try:
      s.bind((address, 0))
      found[name] = s.getsockname()[0]
    except OSError as e:
      found[name] = e.strerror
print(json.dumps(found))
'''


def test_over_ipv6_cluster_addresses_the_key_is_proven_and_without_it_nothing_answers(
    two_hosts, keyed_shim, tmp_path):
  key, other_run = _key(str(tmp_path)), _key(str(tmp_path), 'other')
  a, b = two_hosts_lib.SERVER6, two_hosts_lib.CLIENT6
  server_env = _shim_env(keyed_shim, str(tmp_path), a, [a, b], key)
  binds = json.loads(subprocess.run(
      [*two_hosts['a'], sys.executable, '-S', '-c', _BINDS], env=server_env,
      capture_output=True, text=True, timeout=60, check=True).stdout)
  # Every IPv6 wildcard on the host's IPv6 address; no IPv4 one at all.
  assert binds == {'v4': 'Cannot assign requested address', 'dual': a,
                   'v6only': a}, binds
  server = subprocess.Popen(
      [*two_hosts['a'], sys.executable, '-S', '-c',
       two_hosts_lib.ANSWERING_SERVER, '0', 'hello'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env)
  try:
    port = int(server.stdout.readline().split()[1])
    target = [[a, port, True], [a, port, False]]
    with_key = _clients(two_hosts, target, _shim_env(
        keyed_shim, str(tmp_path), b, [a, b], key))
    wrong_key = _clients(two_hosts, target, _shim_env(
        keyed_shim, str(tmp_path), b, [a, b], other_run))
    silent = _clients(two_hosts, target[:1])
    # Host b left out of a's list (a node moved away): not even the key
    # gets in from there.
    loopback.write_hosts(os.path.join(str(tmp_path), f'hosts-{a}'), [a])
    unlisted = _clients(two_hosts, target[:1], _shim_env(
        keyed_shim, str(tmp_path), b, [a, b], key))
  finally:
    server.kill()
    stderr = server.communicate(timeout=30)[1]
  assert [x for x, _ in with_key] == ['hello', 'hello'], (with_key, stderr)
  assert [x for x, _ in wrong_key] == ['ConnectionRefusedError'] * 2, wrong_key
  assert silent[0][0] == 'TimeoutError', silent
  assert unlisted[0][0] != 'hello', unlisted
  assert f'refused a connection from {b} (wrong proof)' in stderr, stderr
  assert f'refused a connection from {b} (not a host of the run)' in stderr


def test_a_client_dialing_an_ipv4_host_as_v4_mapped_ipv6_proves_the_same_key(
    two_hosts, keyed_shim, tmp_path):
  # An AF_INET6 socket to ::ffff:10.9.1.1 reaches the same IPv4 listener:
  # its hello names the listener as IPv4, as the server sees it.
  key = _key(str(tmp_path))
  server = _KeyedServer(two_hosts, keyed_shim, str(tmp_path), key)
  mapped = [['::ffff:10.9.1.1', server.port, True],
            ['::ffff:10.9.1.1', server.port, False]]
  try:
    with_key = _clients(two_hosts, mapped, _shim_env(
        keyed_shim, str(tmp_path), '10.9.1.2', ['10.9.1.1', '10.9.1.2'], key))
    without = _clients(two_hosts, mapped[:1])
  finally:
    stderr = server.stop()
  assert [x for x, _ in with_key] == ['hello', 'hello'], (with_key, stderr)
  assert without[0][0] == 'TimeoutError', without


_STAND_IN = r'''
import socket, sys
listener = socket.socket()
listener.bind(('10.9.1.1', 0))
listener.listen(4)
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.settimeout(5)
got = b''
while len(got) < 60:
  chunk = conn.recv(60 - len(got))
  if not chunk:
    break
  got += chunk
conn.sendall(bytes(48))  # A reply without the key.
print(got.hex(), flush=True)
conn.recv(64)  # What the client sends next, if anything: gRPC's bytes.
'''


def test_a_stand_in_listener_gets_only_the_hello_which_opens_no_other_port(
    two_hosts, keyed_shim, tmp_path):
  # A listener without the key on a port of the run's host a: the client's
  # connect fails, and the 60-byte hello is all the stand-in ever reads.
  key = _key(str(tmp_path))
  client_env = _shim_env(keyed_shim, str(tmp_path), '10.9.1.2',
                         ['10.9.1.1', '10.9.1.2'], key)
  stand_in = subprocess.Popen([*two_hosts['a'], sys.executable, '-c', _STAND_IN],
                              stdout=subprocess.PIPE, text=True)
  port = int(stand_in.stdout.readline())
  answer = _clients(two_hosts, [['10.9.1.1', port, False]], client_env)
  hello = bytes.fromhex(stand_in.stdout.readline().strip())
  stand_in.wait(timeout=30)
  assert answer[0][0] == 'ConnectionRefusedError', answer
  assert len(hello) == 60 and hello[:4] == b'ACL1'

  # The real server, on another port: the client is answered, and the
  # captured hello, a proof for the stand-in's port, opens nothing there.
  server = _KeyedServer(two_hosts, keyed_shim, str(tmp_path), key)
  try:
    first = _clients(two_hosts, [['10.9.1.1', server.port, True]], client_env)
    replayed = _send(two_hosts, server.port, hello)
  finally:
    stderr = server.stop()
  assert first[0][0] == 'hello', (first, stderr)
  assert replayed == b'', replayed
  assert 'refused a connection from 10.9.1.2 (wrong proof)' in stderr, stderr


_SEND = r'''
import socket, sys
with socket.create_connection(('10.9.1.1', int(sys.argv[1])), 5) as s:
  s.settimeout(5)
  s.sendall(bytes.fromhex(sys.argv[2]))
  got = b''
  try:  # Until the server closes: its reply and answer may come apart.
    while len(got) < 64:
      chunk = s.recv(64 - len(got))
      if not chunk:
        break
      got += chunk
  except OSError:
    pass
  print(got.hex())
'''


def _send(hosts, port, data: bytes) -> bytes:
  """`data` sent from host b by a plain client; what came back."""
  result = subprocess.run(
      [*hosts['b'], sys.executable, '-S', '-c', _SEND, str(port), data.hex()],
      capture_output=True, text=True, timeout=60, check=True)
  return bytes.fromhex(result.stdout.strip())


def _hello(key: bytes, address: str, port: int, when: int,
           nonce: bytes) -> bytes:
  """A hello as handshake.c makes it, for the tests' own."""
  server = (bytes([4]) + socket.inet_aton(address) + bytes(12) +
            port.to_bytes(2, 'big'))
  stamp = when.to_bytes(8, 'big')
  return b'ACL1' + stamp + nonce + hmac.new(
      key, b'acme-launch hello' + server + stamp + nonce,
      hashlib.sha256).digest()


def test_a_hello_is_taken_once_within_its_window_for_its_own_port_only(
    two_hosts, keyed_shim, tmp_path):
  path = _key(str(tmp_path))
  key = loopback.read_run_key(path)
  server = _KeyedServer(two_hosts, keyed_shim, str(tmp_path), path)
  now = int(time.time())
  try:
    fresh = _hello(key, '10.9.1.1', server.port, now, os.urandom(16))
    answered = _send(two_hosts, server.port, fresh)
    again = _send(two_hosts, server.port, fresh)
    stale = _send(two_hosts, server.port, _hello(
        key, '10.9.1.1', server.port, now - 60, os.urandom(16)))
    ahead = _send(two_hosts, server.port, _hello(
        key, '10.9.1.1', server.port, now + 60, os.urandom(16)))
    other_port = _send(two_hosts, server.port, _hello(
        key, '10.9.1.1', server.port + 1, now, os.urandom(16)))
    other_host = _send(two_hosts, server.port, _hello(
        key, '10.9.1.3', server.port, now, os.urandom(16)))
  finally:
    stderr = server.stop()
  # The server's reply (48 bytes: its nonce and proof over the client's
  # nonce), then gRPC's stream: here the server's b'hello'.
  nonce = fresh[12:28]
  assert answered[48:] == b'hello', (answered, stderr)
  server_id = (bytes([4]) + socket.inet_aton('10.9.1.1') + bytes(12) +
               server.port.to_bytes(2, 'big'))
  assert answered[16:48] == hmac.new(
      key, b'acme-launch reply' + server_id + nonce + answered[:16],
      hashlib.sha256).digest()
  for refused in (again, stale, ahead, other_port, other_host):
    assert refused == b''
  assert 'refused a connection from 10.9.1.2 (proof seen before)' in stderr
  assert stderr.count('(proof out of its time window)') == 2, stderr
  assert stderr.count('(wrong proof)') == 2, stderr


_SILENT = r'''
import socket, sys, time
held = []
for _ in range(int(sys.argv[2])):
  s = socket.create_connection(('10.9.1.1', int(sys.argv[1])), 5)
  held.append(s)
slow = socket.create_connection(('10.9.1.1', int(sys.argv[1])), 5)
slow.sendall(b'ACL1')  # A hello's first bytes, the rest never.
held.append(slow)
print('holding', flush=True)
time.sleep(60)
'''


def test_silent_and_slow_attackers_do_not_delay_the_runs_connections(
    two_hosts, keyed_shim, tmp_path):
  key = _key(str(tmp_path))
  client_env = _shim_env(keyed_shim, str(tmp_path), '10.9.1.2',
                         ['10.9.1.1', '10.9.1.2'], key)
  server = _KeyedServer(two_hosts, keyed_shim, str(tmp_path), key)
  attacker = subprocess.Popen(
      [*two_hosts['b'], sys.executable, '-S', '-c', _SILENT, str(server.port),
       '20'], stdout=subprocess.PIPE, text=True)
  try:
    assert attacker.stdout.readline().strip() == 'holding'
    answers = _clients(two_hosts, [['10.9.1.1', server.port, False]] * 5,
                       client_env)
  finally:
    attacker.kill()
    attacker.wait()
    stderr = server.stop()
  assert [a for a, _ in answers] == ['hello'] * 5, (answers, stderr)
  assert max(seconds for _, seconds in answers) < 1.0, answers
  assert 'refused a connection from 10.9.1.2 (a short proof)' in stderr, stderr


_GRPC_SERVER = r"""
import sys, time
from concurrent import futures
import grpc
handler = grpc.method_handlers_generic_handler('t', {
    'Echo': grpc.unary_unary_rpc_method_handler(lambda request, _: request)})
server = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
port = server.add_insecure_port('[::]:%s' % sys.argv[1])
server.start()
print(port, flush=True)
time.sleep(600)
"""

# Calls Echo at argv[1] every 0.2 s for argv[2] seconds on one channel;
# prints what each call got ('ok' or the status code's name).
_GRPC_CLIENT = r"""
import json, sys, time
import grpc
channel = grpc.insecure_channel(sys.argv[1])
echo = channel.unary_unary('/t/Echo')
answers, end = [], time.time() + float(sys.argv[2])
while time.time() < end:
  try:
    answers.append('ok' if echo(b'x', timeout=2) == b'x' else 'wrong')
  except grpc.RpcError as e:
    answers.append(e.code().name)
  time.sleep(0.2)
print(json.dumps(answers), flush=True)
"""


def test_grpc_calls_across_hosts_need_the_key_and_reconnect_after_the_server_restarts(
    two_hosts, keyed_shim, tmp_path):
  # grpcio's own core (non-blocking connect, epoll, its accept loop) with
  # the shim on both sides: answered with the key, and again once a server
  # restarted on the same port is back; never without it.
  key = _key(str(tmp_path))
  server_env = _shim_env(keyed_shim, str(tmp_path), '10.9.1.1',
                         ['10.9.1.1', '10.9.1.2'], key)
  client_env = _shim_env(keyed_shim, str(tmp_path), '10.9.1.2',
                         ['10.9.1.1', '10.9.1.2'], key)

  def serve(port):
    process = subprocess.Popen(
        [*two_hosts['a'], sys.executable, '-c', _GRPC_SERVER, str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=server_env)
    return process, int(process.stdout.readline())

  def calls(seconds, env):
    return subprocess.Popen(
        [*two_hosts['b'], sys.executable, '-c', _GRPC_CLIENT,
         f'10.9.1.1:{port}', str(seconds)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env)

  server, port = serve(0)
  try:
    keyed = calls(12, client_env)
    plain = calls(3, dict(os.environ))
    plain_answers = json.loads(plain.communicate(timeout=60)[0])
    time.sleep(1)
    server.kill()
    server.communicate(timeout=30)
    time.sleep(2)
    server, _ = serve(port)  # Restarted, on its port.
    keyed_answers = json.loads(keyed.communicate(timeout=60)[0])
  finally:
    server.kill()
    stderr = server.communicate(timeout=30)[1]
  assert plain_answers and 'ok' not in plain_answers, plain_answers
  assert keyed_answers[0] == 'ok', (keyed_answers, stderr[-2000:])
  # Down for a while, then answered again on a new connection.
  assert keyed_answers.count('ok') < len(keyed_answers), keyed_answers
  assert keyed_answers[-1] == 'ok', (keyed_answers, stderr[-2000:])


# --- --run_key=all: the proof on loopback too (local_mp) ------------------

def _loopback_env(shim, key, run_ports):
  """A local_mp node's shim under --run_key=all (run/local_mp/launch.py)."""
  return dict(os.environ, LD_PRELOAD=shim, ACME_LAUNCH_LOOPBACK_DEBUG='1', **{
      loopback.RUN_KEY_ENV: key,
      loopback.RUN_PORTS_ENV: ','.join(map(str, run_ports))})


def _local_client(targets, env, argv_prefix=()):
  return subprocess.Popen(
      [*argv_prefix, sys.executable, '-S', '-c', _CLIENT, json.dumps(targets)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_under_run_key_all_a_runs_port_on_loopback_answers_only_the_key_even_to_the_runs_own_user(
    keyed_shim, tmp_path):
  why = other_user.why_not()
  if why:
    pytest.skip(why)
  key, other_run = _key(str(tmp_path)), _key(str(tmp_path), 'other')
  with socket.socket() as free:
    free.bind(('127.0.0.1', 0))
    port = free.getsockname()[1]
  server = subprocess.Popen(
      [sys.executable, '-S', '-c', two_hosts_lib.ANSWERING_SERVER, str(port),
       'hello'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=_loopback_env(keyed_shim, key, [port]))
  # A local service that is not the run's (a tracker's, started by a node:
  # its environment), which speaks first: its port is not listed, so
  # nobody proves anything to it, and it is not held back for a proof.
  service = subprocess.Popen(
      [sys.executable, '-S', '-c', two_hosts_lib.ANSWERING_SERVER, '0',
       'service'], stdout=subprocess.PIPE, text=True,
      env=_loopback_env(keyed_shim, key, [port]))
  scratch = other_user.shared_folder()
  try:
    assert int(server.stdout.readline().split()[1]) == port
    service_port = int(service.stdout.readline().split()[1])
    target = [['127.0.0.1', port, True], ['127.0.0.1', port, False]]
    clients = {  # At once: each refused one waits out its 5 s.
        'key': _local_client(target + [['127.0.0.1', service_port, True]],
                             _loopback_env(keyed_shim, key, [port])),
        'wrong_key': _local_client(target,
                                   _loopback_env(keyed_shim, other_run, [port])),
        'shim_no_key': _local_client(target[:1], dict(
            os.environ, LD_PRELOAD=keyed_shim)),
        'plain': _local_client(target[:1], dict(os.environ)),
        'nobody': _local_client(
            target[:1], other_user.environment(
                other_user.home_of(other_user.NOBODY, scratch)),
            other_user.command(other_user.NOBODY, [], scratch)),
    }
    answers = {name: [a for a, _ in json.loads(c.communicate(timeout=60)[0])]
               for name, c in clients.items()}
  finally:
    for process in (server, service):
      process.kill()
    stderr = server.communicate(timeout=30)[1]
    service.communicate(timeout=30)
    shutil.rmtree(scratch, ignore_errors=True)
  # The run's own user with the key, blocking and not (gRPC's way), and
  # the same client at a local service that is not the run's: answered.
  assert answers['key'] == ['hello', 'hello', 'service'], (answers, stderr)
  # Another run's key: refused, and the client's connect fails.
  assert answers['wrong_key'] == ['ConnectionRefusedError'] * 2, answers
  # The run's user without the key (with the shim or without), and another
  # user: not one byte; a connection that proves nothing is not even taken.
  for name in ('shim_no_key', 'plain', 'nobody'):
    assert answers[name] == ['TimeoutError'], answers
  assert 'without the run key (wrong proof)' in stderr, stderr


# --- The key file (run/loopback.py; the shim reads it by the same rules) --

def test_a_run_gets_a_fresh_private_key_and_its_resume_the_same_one(tmp_path):
  first, second = tmp_path / 'first', tmp_path / 'second'
  first.mkdir()
  second.mkdir()
  key = loopback.run_key_of(str(first))
  path = loopback.run_key_path(str(first))
  assert len(key) == loopback.RUN_KEY_SIZE
  assert os.stat(path).st_mode & 0o777 == 0o600
  assert loopback.run_key_of(str(first)) == key          # --resume.
  assert loopback.run_key_of(str(second)) != key         # Another run.


def _planted(tmp_path, how):
  """A run directory whose key file is wrong in the way `how` says."""
  run_dir = tmp_path / how
  run_dir.mkdir()
  path = loopback.run_key_path(str(run_dir))
  if how == 'link':
    loopback.make_run_key(str(tmp_path / 'elsewhere'))
    os.symlink(tmp_path / 'elsewhere', path)
  elif how == 'folder':
    os.mkdir(path)
  else:
    loopback.make_run_key(path)
    if how == 'readable_by_others':
      os.chmod(path, 0o644)
    elif how == 'short':
      os.truncate(path, 16)
    elif how == 'another_users':
      os.chown(path, other_user.NOBODY, other_user.NOBODY)
  return str(run_dir), path


@pytest.mark.parametrize('how,why', [
    ('readable_by_others', 'others can read or change it (chmod 600)'),
    ('short', 'it is not 32 bytes'),
    ('link', 'it is a link'),
    ('folder', 'it is not a regular file'),
    ('another_users', 'it belongs to another user')])
def test_a_key_file_that_cannot_be_used_is_refused_naming_it(tmp_path, how, why):
  if how == 'another_users' and os.geteuid() != 0:
    pytest.skip('chown needs root')
  run_dir, path = _planted(tmp_path, how)
  with pytest.raises(ValueError) as raised:
    loopback.run_key_of(run_dir)
  assert str(raised.value) == f'the run key file {path} cannot be used: {why}'


@pytest.mark.parametrize('how', ['readable_by_others', 'short', 'missing'])
def test_a_node_whose_key_file_cannot_be_used_says_so_in_one_line_and_exits_2_before_it_runs(
    keyed_shim, tmp_path, how):
  # The shim's own check, at load in the node process: the launcher's line,
  # alone, and exit status 2 before the program runs (so neither a server
  # nor a client without the key, and a supervisor that sees it fail).
  if how == 'missing':
    path = str(tmp_path / 'nothing-here')
  else:
    _, path = _planted(tmp_path, how)
  why = {'readable_by_others': 'others can read or change it (chmod 600)',
         'short': 'it is not 32 bytes', 'missing': 'it does not exist'}[how]
  hosts = str(tmp_path / 'hosts')
  loopback.write_hosts(hosts, [])
  probe = "print('ran')"
  result = subprocess.run(
      [sys.executable, '-S', '-c', probe], capture_output=True, text=True,
      timeout=60, check=False,
      env=dict(os.environ, LD_PRELOAD=keyed_shim, **{
          loopback.BIND_ADDRESS_ENV: '127.0.0.1',
          loopback.HOSTS_FILE_ENV: hosts, loopback.RUN_KEY_ENV: path}))
  assert (result.returncode, result.stdout) == (2, ''), result.stderr
  assert result.stderr == (f'acme-launch: error: the run key file {path} '
                           f'cannot be used: {why}\n')


_PRINT_ENV = ('import json, os, sys; print(json.dumps([dict(os.environ), '
              'sys.argv]))')


def test_a_ray_hosts_node_gets_the_key_as_a_private_file_named_in_its_environment(
    tmp_path):
  from acme_launch.run.ray import host as ray_host
  key = os.urandom(loopback.RUN_KEY_SIZE)
  log = tmp_path / 'actor_0.log'
  host = ray_host.NodeHost('actor/0')
  try:
    host.allow_hosts(['10.0.0.1', '10.0.0.2'], key)
    host.start([sys.executable, '-c', _PRINT_ENV], {},
               str(tmp_path / 'job.pkl'), b'', str(log))
    deadline = time.time() + 60
    while host.poll() is None and time.time() < deadline:
      time.sleep(0.1)
    assert host.poll() == 0, log.read_text()
    env, argv = json.loads(log.read_text().strip().splitlines()[-1])
    path = env[loopback.RUN_KEY_ENV]
    assert loopback.read_run_key(path) == key  # Its user's alone, 0600.
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    # The path only: the key is in no variable, argument or log line.
    text = json.dumps([env, argv]) + log.read_text()
    for form in (key.hex(), key.decode('latin1'), str(key)):
      assert form not in text
    host.allow_hosts(['10.0.0.1'], key)   # A node moved: the same key.
    assert loopback.read_run_key(path) == key
  finally:
    host.kill()
  assert not os.path.exists(path)


@pytest.mark.parametrize('launch_type', ['local_mt', 'test_mt', 'ray'])
def test_run_key_all_under_another_launch_type_is_one_line_before_anything_starts(
    tmp_path, launch_type):
  from acme_launch import errors, prepare
  from acme_launch.config import options as options_lib
  options = options_lib.parse_again([
      'launch.py', '--config=smoke', f'--launch_type={launch_type}',
      '--run_key=all', f'--workdir={tmp_path}', '--run_name=r',
      '--ray_address=192.0.2.1:1'])
  with pytest.raises(errors.LaunchError) as raised:
    prepare.decide_early(options)
  assert str(raised.value).startswith(
      f'--run_key=all works with --launch_type=local_mp only (under '
      f'{launch_type}: ')
  assert not os.listdir(tmp_path)
