"""Server ports held from the moment the launcher chooses them (run/ports.py):
nobody else is handed them, the node's own server binds them, again and
again."""

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import courier
import pytest
import reverb

from acme_launch.run import ports
from tests.conftest import REPO_ROOT


def _bind_error(family: int, ip: str, port: int) -> int:
  """0 if a plain socket (no SO_REUSEADDR, as portpicker's) binds the port,
  else the errno."""
  with socket.socket(family, socket.SOCK_STREAM) as s:
    try:
      s.bind((ip, port))
    except OSError as e:
      return e.errno
  return 0


def test_a_held_port_is_refused_to_others_and_taken_by_the_node_s_servers():
  held = ports.PortHolder()
  port, replay_port, unused = held.take(), held.take(), held.take()
  assert len({port, replay_port, unused}) == 3
  for family, ip in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET, '0.0.0.0'),
                     (socket.AF_INET6, '::1'), (socket.AF_INET6, '::')):
    assert _bind_error(family, ip, port) == errno.EADDRINUSE, ip
  # The node's Courier server binds it beside the holder, and answers; so
  # does the next one, as a restarted node's would.
  for answer in (1, 2):
    server = courier.Server(port=port)
    server.Bind('answer', lambda a=answer: a)
    server.Start()
    try:
      assert courier.Client(f'localhost:{port}').answer() == answer
    finally:
      server.Stop()
      server.Join()
  # Reverb's server (the replay node) too.
  replay = reverb.Server(tables=[reverb.Table.queue('q', 10)], port=replay_port)
  try:
    assert 'q' in reverb.Client(f'localhost:{replay_port}').server_info()
  finally:
    replay.stop()
  assert _bind_error(socket.AF_INET, '127.0.0.1', unused) == errno.EADDRINUSE
  held.release()  # (The servers' ports may stay in TIME_WAIT a while.)
  assert _bind_error(socket.AF_INET, '127.0.0.1', unused) == 0


def test_a_host_address_is_held_on_that_address():
  held = ports.PortHolder()
  port = held.take('127.0.0.1')
  try:
    assert _bind_error(socket.AF_INET, '127.0.0.1', port) == errno.EADDRINUSE
    server = courier.Server(port=port)
    server.Start()
    server.Stop()
    server.Join()
  finally:
    held.release()


# In a network namespace of its own whose ephemeral range is 8 ports: other
# processes' picks (a bind to port 0, as portpicker's) and outgoing
# connections would soon land on the 4 held ports if they could. They never
# do while held, and do once let go.
_CROWDED = textwrap.dedent('''
    import socket, subprocess
    from acme_launch.run import ports
    subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
    with open('/proc/sys/net/ipv4/ip_local_port_range', 'w') as f:
      f.write('40000 40007')
    listener = socket.create_server(('127.0.0.1', 30000))

    def others():
      """The ports 40 binds to port 0 and 3 connections get."""
      seen = set()
      for family in (socket.AF_INET, socket.AF_INET6) * 20:
        with socket.socket(family) as s:
          s.bind(('', 0))
          seen.add(s.getsockname()[1])
      clients = [socket.create_connection(('127.0.0.1', 30000))
                 for _ in range(3)]
      seen.update(c.getsockname()[1] for c in clients)
      for c in clients:
        listener.accept()[0].close()
        c.close()
      return seen

    held = ports.PortHolder()
    taken = {held.take() for _ in range(4)}
    assert len(taken) == 4 and taken <= set(range(40000, 40008)), taken
    print(sorted(others() & taken))
    held.release()
    print(sorted(others() & taken))
    ''')


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('unshare'),
                    reason='a network namespace of its own needs root')
def test_no_other_process_is_handed_a_held_port_even_when_ports_are_scarce():
  out = subprocess.run(
      ['unshare', '--net', sys.executable, '-c', _CROWDED], cwd=REPO_ROOT,
      capture_output=True, text=True, timeout=60, check=False)
  assert out.returncode == 0, out.stderr[-2000:]
  while_held, after = out.stdout.splitlines()
  assert while_held == '[]'
  assert after != '[]'  # Without the holder they are handed out.



_EXHAUSTED = textwrap.dedent('''
    import subprocess, sys
    from acme_launch import errors
    from acme_launch.run import ports
    subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
    with open('/proc/sys/net/ipv4/ip_local_port_range', 'w') as f:
      f.write('40000 40002')
    held, taken = ports.PortHolder(), []
    try:
      while len(taken) < 4:
        taken.append(held.take())
    except errors.LaunchError as e:
      print(sorted(taken))
      print(e)
    held.release()
    # A whole launch on a host with too few: one line, exit 2.
    launch = subprocess.run(
        [sys.executable, 'launch.py', '--config=smoke',
         '--workdir=' + sys.argv[1], '--run_name=crowded'],
        capture_output=True, text=True, timeout=120)
    print(launch.returncode)
    print(launch.stderr.strip().splitlines()[-1])
    print('Traceback' in launch.stderr)
    ''')


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('unshare'),
                    reason='a network namespace of its own needs root')
def test_a_host_without_free_ports_gets_one_line_not_a_traceback(tmp_path):
  out = subprocess.run(
      ['unshare', '--net', sys.executable, '-c', _EXHAUSTED, str(tmp_path)],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=180, check=False)
  assert out.returncode == 0, out.stderr[-2000:]
  taken, refused, code, last_line, traceback = out.stdout.splitlines()
  taken = json.loads(taken)
  assert taken and set(taken) <= {40000, 40001, 40002}, taken
  assert refused.startswith('no free port left on this host') and \
      f'this run holds {len(taken)};' in refused, refused
  assert code == '2'
  assert last_line.startswith('acme-launch: error: no free port left'), last_line
  assert traceback == 'False'  # The launch's whole stderr has none.
