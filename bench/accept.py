"""What the loopback shim's screening costs a connection: connect + accept
round trips on loopback, without the shim and with it.

    .venv/bin/python bench/accept.py [--connections=1000] [--rounds=2] [--out=bench/out]

Each arm is a fresh Python process whose dual-stack wildcard listener (as
Courier's and Reverb's gRPC servers bind it) accepts `--connections` IPv4
connections, one at a time, each closed with a reset (no TIME_WAIT rows
piling up), best of 5 passes: `none` without the shim, `sock_diag` with it
(the peer looked up by NETLINK_SOCK_DIAG), `proc` with it forced to read
/proc/net/tcp and /proc/net/tcp6 (its fallback). The arms alternate,
`--rounds` times. Prints microseconds per connection and the rows of
/proc/net/tcp*; writes OUT/accept.json. A run's servers accept a few
connections per node (bench/startup.py measures the start-up itself).
"""

import argparse
import json
import os
import subprocess
import sys
from typing import List

from acme_launch.run import loopback

_ARM = r'''
import socket, struct, sys, time
n = int(sys.argv[1])
listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
listener.bind(('::', 0))
listener.listen(64)
port = listener.getsockname()[1]
reset = struct.pack('ii', 1, 0)
def once():
  client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, reset)
  client.connect(('127.0.0.1', port))
  served, _ = listener.accept()
  client.close()
  served.close()
for _ in range(min(n, 100)):
  once()
passes = []
for _ in range(5):
  start = time.perf_counter()
  for _ in range(n):
    once()
  passes.append((time.perf_counter() - start) / n * 1e6)
print(min(passes))
'''
ARMS = ('none', 'sock_diag', 'proc')


def _table_rows() -> int:
  rows = 0
  for name in ('/proc/net/tcp', '/proc/net/tcp6'):
    try:
      with open(name) as f:
        rows += sum(1 for _ in f) - 1
    except OSError:
      pass
  return rows


def measure(arm: str, shim: str, connections: int) -> float:
  """Microseconds per connect + accept in one arm's process."""
  env = {k: v for k, v in os.environ.items()
         if k not in ('LD_PRELOAD', 'ACME_LAUNCH_LOOPBACK_LOOKUP')}
  if arm != 'none':
    env['LD_PRELOAD'] = shim
  if arm == 'proc':
    env['ACME_LAUNCH_LOOPBACK_LOOKUP'] = 'proc'
  result = subprocess.run([sys.executable, '-S', '-c', _ARM, str(connections)],
                          env=env, capture_output=True, text=True, check=True,
                          timeout=600)
  return float(result.stdout.split()[-1])


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--connections', type=int, default=1000)
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--out', default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), 'out'))
  args = parser.parse_args(argv)
  shim = loopback.ensure()
  figures = {arm: [] for arm in ARMS}
  for _ in range(args.rounds):
    for arm in ARMS:
      # The /proc fallback reads the whole table per lookup: fewer of them.
      n = max(1, args.connections // 10) if arm == 'proc' else args.connections
      figures[arm].append(measure(arm, shim, n))
  rows = _table_rows()
  print(f'connect + accept on loopback, microseconds each (best of 5 passes, '
        f'{args.rounds} rounds); /proc/net/tcp* held {rows} rows')
  for arm in ARMS:
    print(f'  {arm:<10} ' + ' '.join(f'{v:9.1f}' for v in figures[arm]))
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'accept.json'), 'w') as f:
    json.dump({'microseconds': figures, 'connections': args.connections,
               'proc_rows': rows}, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
