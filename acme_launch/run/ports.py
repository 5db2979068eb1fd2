"""Ports for the nodes' servers, held from the moment they are chosen.

A node's server address is chosen by the launcher before any node starts
(Launchpad's local builder asks portpicker for a port free at that moment and
closes it again); the node binds it later, once it has built its object,
seconds afterwards, and again each time it is restarted. In between, the
port is free for anyone: another run's launcher picking its own ports, or
any process's outgoing connection, can be handed the same port, and then the
node's server cannot start, nor can any restart of it (the run ends with
that node failed).

`PortHolder` closes that gap. For each chosen port it keeps one socket bound
to it, with SO_REUSEADDR and never listening, until the run ends. The kernel
hands no bound port to another bind to port 0 or to an outgoing connection
(both skip ports in use), while the node's own server, which binds that
exact port with SO_REUSEADDR (gRPC's servers, so Courier's and Reverb's, set
it), binds beside the holder, as often as it is restarted. Only a process
told the port could still bind it.

This module imports nothing heavy: node processes unpickle `HeldAddress`.
"""

import errno
import socket
from typing import List

from acme_launch import errors


class HeldAddress:
  """A Launchpad address builder for one server: 'HOST:PORT', fixed at
  launch. (Launchpad only calls `build()`: no need for its base class.)"""

  def __init__(self, address: str):
    self._address = address

  def build(self) -> str:
    return self._address


class PortHolder:
  """Free ports, each held by a bound socket until `release()`."""

  def __init__(self):
    self._sockets: List[socket.socket] = []

  def take(self, ip: str = '') -> int:
    """A port free now on `ip` ('': on every address, IPv4 and IPv6, or
    IPv4's alone on a host without IPv6), held from now on. LaunchError if
    the host has none left."""
    try:
      s = self._bind(ip)
    except OSError as e:
      if e.errno != errno.EADDRINUSE:
        raise
      raise errors.LaunchError(
          f'no free port left on {ip or "this host"} for the nodes\' servers '
          f'(this run holds {len(self._sockets)}; every other port of the '
          'range net.ipv4.ip_local_port_range is in use): end other programs '
          'holding ports, or widen that range') from None
    self._sockets.append(s)
    return s.getsockname()[1]

  @staticmethod
  def _bind(ip: str) -> socket.socket:
    if ip:
      return _bound(socket.AF_INET, ip)
    try:
      return _bound(socket.AF_INET6, '::')
    except OSError as e:
      if e.errno not in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
        raise
      return _bound(socket.AF_INET, '0.0.0.0')  # No IPv6 on this host.

  def release(self) -> None:
    """Lets every held port go (the run is over)."""
    for s in self._sockets:
      s.close()
    self._sockets = []


def _bound(family: int, ip: str) -> socket.socket:
  s = socket.socket(family, socket.SOCK_STREAM)
  try:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
      s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((ip, 0))
  except OSError:
    s.close()
    raise
  return s
