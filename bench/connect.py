"""What the run key's handshake costs a connection between two hosts:
connect to first answer, with the shim screening by host only and with
the handshake too, side by side.

    .venv/bin/python bench/connect.py [--connections=300] [--rounds=3] [--out=bench/out]

Hosts a and b are network namespaces joined by a veth pair
(acme_launch/testing/two_hosts.py; needs root). A server on host a, with
the shim on its cluster address (as a Ray node's servers have it), answers
each connection with one byte; a client on host b, with the shim as a node
there, connects (blocking), reads that byte and closes with a reset,
`--connections` times, best of 5 passes. Arms: `hosts` (the run's hosts
listed, no key: what a Ray run did before the key) and `key` (the run's
key too: the hello and the reply before the first answer). The arms
alternate, `--rounds` times. Prints microseconds per connection and the
ratio; writes OUT/connect.json. A run's nodes open a few dozen such
connections, long-lived.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Dict, List

from acme_launch.run import loopback
from acme_launch.testing import two_hosts

# Connections closed with a reset: no TIME_WAIT rows piling up. Warm-up,
# then the best of 5 timed passes (timeit's repeat).
_CLIENT = r'''
import socket, struct, sys, timeit
address, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def answered_once():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.connect((address, port))
    assert s.recv(1) == b'x'
timeit.timeit(answered_once, number=min(n, 50))
print(min(timeit.repeat(answered_once, number=n, repeat=5)) / n * 1e6)
'''
ARMS = ('hosts', 'key')


def _env(shim: str, folder: str, address: str, key: str) -> dict:
  hosts = os.path.join(folder, f'hosts-{address}')
  loopback.write_hosts(hosts, [two_hosts.SERVER, two_hosts.CLIENT])
  env = dict(os.environ, LD_PRELOAD=shim, **{
      loopback.BIND_ADDRESS_ENV: address, loopback.HOSTS_FILE_ENV: hosts})
  if key:
    env[loopback.RUN_KEY_ENV] = key
  return env


def measure(hosts, arm: str, shim: str, folder: str, connections: int) -> float:
  """Microseconds per connection, connect to first byte, in one arm."""
  key = os.path.join(folder, 'key') if arm == 'key' else ''
  server = subprocess.Popen(
      [*hosts['a'], sys.executable, '-S', '-c', two_hosts.ANSWERING_SERVER,
       '0', 'x'],
      stdout=subprocess.PIPE, text=True,
      env=_env(shim, folder, two_hosts.SERVER, key))
  try:
    port = server.stdout.readline().split()[1]
    result = subprocess.run(
        [*hosts['b'], sys.executable, '-S', '-c', _CLIENT, two_hosts.SERVER,
         port, str(connections)], capture_output=True, text=True, check=True,
        timeout=600, env=_env(shim, folder, two_hosts.CLIENT, key))
  finally:
    server.kill()
    server.wait()
  return float(result.stdout.split()[-1])


def _figures(connections: int, rounds: int) -> Dict[str, List[float]]:
  """Microseconds per connection of each arm, a figure per round."""
  shim = loopback.ensure()
  figures: Dict[str, List[float]] = {arm: [] for arm in ARMS}
  with tempfile.TemporaryDirectory() as folder, two_hosts.two_hosts() as hosts:
    loopback.make_run_key(os.path.join(folder, 'key'))
    for _ in range(rounds):
      for arm in ARMS:
        figures[arm].append(measure(hosts, arm, shim, folder, connections))
  return figures


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  for flag, default in (('--connections', 300), ('--rounds', 3)):
    parser.add_argument(flag, type=int, default=default)
  parser.add_argument('--out', default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), 'out'))
  args = parser.parse_args(argv)
  figures = _figures(args.connections, args.rounds)
  print(f'connect to first answer between two network namespaces, '
        f'microseconds each (best of 5 passes of {args.connections}, '
        f'{args.rounds} rounds)')
  for arm in ARMS:
    print(f'  {arm:<6} ' + ' '.join(f'{v:9.1f}' for v in figures[arm]))
  ratio = min(figures['key']) / min(figures['hosts'])
  print(f'  key / hosts (best of each): {ratio:.2f}')
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'connect.json'), 'w') as f:
    json.dump({'microseconds': figures, 'connections': args.connections,
               'ratio': ratio}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
