"""Two hosts of one run on this machine, for the run key's tests and
bench/connect.py: network namespaces a (10.9.1.1 and fd09::1) and b
(10.9.1.2 and fd09::2, also 10.9.1.3: an address of the network that is not
one of the run's hosts), joined by a veth pair. Lighter than testing/cluster.py's Ray cluster: no
Ray, no bridge. Needs root (CAP_NET_ADMIN).
"""

import contextlib
import os
import subprocess
from typing import Dict, Iterator, List

SERVER, CLIENT, OUTSIDER = '10.9.1.1', '10.9.1.2', '10.9.1.3'
SERVER6, CLIENT6 = 'fd09::1', 'fd09::2'   # The same hosts' IPv6 addresses.


def _ip(namespace: str, *argv: str) -> None:
  subprocess.run(['ip', 'netns', 'exec', namespace, 'ip', *argv], check=True)


@contextlib.contextmanager
def two_hosts() -> Iterator[Dict[str, List[str]]]:
  """{'a': prefix, 'b': prefix}: a command's argv prefix to run it there."""
  tag = f'aclkey{os.getpid() % 100000}'
  names = {'a': f'{tag}a', 'b': f'{tag}b'}
  try:
    for ns in names.values():
      subprocess.run(['ip', 'netns', 'add', ns], check=True)
    subprocess.run(['ip', 'link', 'add', f'{tag}x', 'netns', names['a'], 'type',
                    'veth', 'peer', 'name', f'{tag}y', 'netns', names['b']],
                   check=True)
    for host, device, addresses in (('a', 'x', [SERVER]),
                                    ('b', 'y', [CLIENT, OUTSIDER])):
      for address in addresses:
        _ip(names[host], 'addr', 'add', f'{address}/24', 'dev', tag + device)
      # No duplicate address detection: usable at once, not seconds later.
      _ip(names[host], '-6', 'addr', 'add',
          f'{SERVER6 if host == "a" else CLIENT6}/64', 'dev', tag + device,
          'nodad')
      _ip(names[host], 'link', 'set', tag + device, 'up')
      _ip(names[host], 'link', 'set', 'lo', 'up')
    yield {h: ['ip', 'netns', 'exec', ns] for h, ns in names.items()}
  finally:
    for ns in names.values():
      subprocess.run(['ip', 'netns', 'del', ns], check=False,
                     capture_output=True)


# A server for a host (run with the shim preloaded): a dual-stack wildcard
# listener on port argv[1] (0: any), as gRPC's servers bind it (the shim
# puts it on its cluster address), non-blocking as gRPC's (a refusal reads
# as an empty queue); prints its address and port, then answers every
# connection it is handed with argv[2] and closes it.
ANSWERING_SERVER = r'''
import select, socket, sys
listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(('::', int(sys.argv[1])))
listener.listen(64)
listener.setblocking(False)
print(*listener.getsockname()[:2], flush=True)
answer = sys.argv[2].encode()
while True:
  select.select([listener], [], [])
  try:
    conn, _ = listener.accept()
  except BlockingIOError:
    continue
  conn.sendall(answer)
  conn.close()
'''
