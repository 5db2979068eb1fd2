"""What a user on a run's host tries against its node servers (for tests).

    python -m tests.intruder --ports=P1,P2,... --sentinel=PATH [--host=IP]

Run as another user it is the attacker of issue 44; run as the run's own
user it proves that the same attempts do get answers. On loopback (or at
--host: a Ray host's cluster address, tried from another machine of its
network), for each port:

- `raw`: a TCP connection that sends HTTP/2's client preface and an empty
  SETTINGS frame: did any byte come back? (A gRPC server, Courier's and
  Reverb's, sends its SETTINGS frame at once.)
- `methods`: Courier's method listing (None when nothing answered);
  `get_variables` and `get_counts`: the learner's parameters and the
  counter's counts (True when they came back);
- calls of get_variables and of get_counts whose argument is a "reduced"
  object naming os.system with `touch SENTINEL`: where Courier's decoder
  runs it, SENTINEL appears (written by the node, as its user);
- `server_info`: Reverb's ServerInfo call (True when it answered).

Prints one JSON object: {port: {check: result}}. Exits 0 whatever answered.
"""

import argparse
import concurrent.futures
import json
import os
import shlex
import socket
import sys
import threading

TIMEOUT_SECONDS = 5
# HTTP/2's client connection preface and an empty SETTINGS frame.
_PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00'


class Touch:
  """Decoded by a Courier server, runs `touch PATH` there."""

  def __init__(self, path: str):
    self.path = path

  def __reduce__(self):
    return (os.system, (f'touch {shlex.quote(self.path)}',))


def raw_answer(host: str, port: int) -> bool:
  """True when any byte comes back over a plain connection."""
  try:
    with socket.create_connection((host, port), TIMEOUT_SECONDS) as s:
      s.settimeout(TIMEOUT_SECONDS)
      s.sendall(_PREFACE)
      return bool(s.recv(64))
  except OSError:
    return False


def _answers(call) -> bool:
  """True when `call()` returned within about TIMEOUT_SECONDS (in a thread:
  a call that waits for a server to answer may not time out by itself)."""
  done = []

  def target():
    try:
      done.append(call())
    except Exception:  # An error reply, or nothing answered.
      pass

  thread = threading.Thread(target=target, daemon=True)
  thread.start()
  thread.join(TIMEOUT_SECONDS + 5)
  return bool(done)


def courier_checks(host: str, port: int, sentinel: str) -> dict:
  from courier.python import client as courier_client
  client = courier_client.Client(f'{host}:{port}',
                                 call_timeout=TIMEOUT_SECONDS,
                                 wait_for_ready=False)
  found = {'methods': None}

  def list_methods():
    found['methods'] = sorted(courier_client.list_methods(client))

  _answers(list_methods)
  found['get_variables'] = _answers(lambda: client.get_variables(['policy']))
  found['get_counts'] = _answers(client.get_counts)
  for method in ('get_variables', 'get_counts'):
    _answers(lambda m=method: getattr(client, m)(Touch(sentinel)))
  return found


def reverb_answers(host: str, port: int) -> bool:
  """Reverb's ServerInfo RPC, what reverb.Client.server_info sends (through
  grpcio: importing reverb takes TensorFlow's seconds): True when the
  server's tables came back."""
  import grpc
  with grpc.insecure_channel(f'{host}:{port}') as channel:
    server_info = channel.unary_unary(
        '/deepmind.reverb.ReverbService/ServerInfo')
    found = []
    _answers(lambda: found.append(server_info(b'', timeout=TIMEOUT_SECONDS)))
  return bool(found and found[0])


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ports', required=True)
  parser.add_argument('--sentinel', required=True)
  parser.add_argument('--host', default='')
  args = parser.parse_args(argv)
  ports = [int(p) for p in args.ports.split(',')]

  def attempts(port):
    return {'raw': raw_answer(args.host or '127.0.0.1', port),
            **courier_checks(args.host or 'localhost', port, args.sentinel),
            'server_info': reverb_answers(args.host or 'localhost', port)}

  with concurrent.futures.ThreadPoolExecutor(len(ports)) as pool:
    results = dict(zip(ports, pool.map(attempts, ports)))
  print(json.dumps({'uid': os.geteuid(), 'ports': results}), flush=True)
  return 0


if __name__ == '__main__':
  code = main(sys.argv[1:])
  os._exit(code)  # Calls that never answered may still hold threads.
