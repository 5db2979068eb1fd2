"""The Ray cluster a `--launch_type=ray` run goes to, checked before launch.

Connects to a cluster the user started with Ray's own commands (`ray start
--head` / `ray start --address=...`), lists its hosts, refuses public
cluster addresses (Courier and Reverb servers have no authentication), and
checks that the cluster can hold the resource plan: each node's Ray demand
(ray_cpus, GPUs, ray_memory_mb, ray_resources; see plan/resources.py) must fit on
some host, and all of them at once. Every problem is a LaunchError (one
line, exit 2) raised before any process of the run starts.

This module imports ray only when connecting and nothing heavy at the top,
so an unreachable address is reported within seconds.
"""

import dataclasses
import ipaddress
import logging
import os
import socket
import sys
import time
from typing import Dict, List, Mapping, Sequence, Tuple

from acme_launch import errors

ADDRESS_ENV = 'RAY_ADDRESS'
REACH_TIMEOUT_SECONDS = 2.0  # TCP check of HOST:PORT before ray.init.
# RFC 1918, loopback and link-local: where node servers may listen.
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '127.0.0.0/8',
    '169.254.0.0/16'))
_MB = 2 ** 20


@dataclasses.dataclass(frozen=True)
class Host:
  """One alive Ray node: its address and the resources it was started with."""
  node_id: str
  ip: str
  resources: Mapping[str, float]


@dataclasses.dataclass(frozen=True)
class Demand:
  """What one Launchpad node asks of Ray: its actor's options."""
  node: str
  group: str
  num_cpus: float
  num_gpus: int
  memory_mb: int
  custom: Tuple[Tuple[str, float], ...]

  def as_resources(self) -> Dict[str, float]:
    """In Ray's own names and units (memory in bytes)."""
    wanted = {'CPU': self.num_cpus, 'GPU': float(self.num_gpus),
              'memory': float(self.memory_mb * _MB), **dict(self.custom)}
    return {k: v for k, v in wanted.items() if v > 0}


@dataclasses.dataclass(frozen=True)
class Cluster:
  """The connected cluster and where each node of the plan fits."""
  address: str
  hosts: Tuple[Host, ...]
  fit: Mapping[str, str]          # Node name -> the IP of a host that fits it.
  demands: Tuple[Demand, ...]


def resolve_address(flag_value: str) -> str:
  """--ray_address, else RAY_ADDRESS; LaunchError when neither is set."""
  address = flag_value or os.environ.get(ADDRESS_ENV, '')
  if not address:
    raise errors.LaunchError(
        '--launch_type=ray needs the cluster: --ray_address=HOST:PORT (the '
        "head's `ray start --head --port`), --ray_address=auto, or RAY_ADDRESS")
  return address


def _check_reachable(address: str) -> None:
  host, _, port = address.rpartition(':')
  host = host.strip('[]')
  if not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise errors.LaunchError(
        f'--ray_address={address}: expected HOST:PORT (e.g. 10.0.0.1:6379) '
        'or auto')
  try:
    with socket.create_connection((host, int(port)),
                                  timeout=REACH_TIMEOUT_SECONDS):
      pass
  except OSError as e:
    reason = 'timed out' if isinstance(e, socket.timeout) else (
        e.strerror or str(e))
    raise errors.LaunchError(
        f'cannot reach the Ray cluster at {address}: {reason}; start it with '
        '`ray start --head` there, or check --ray_address / RAY_ADDRESS') from None


def connect(address: str) -> Tuple[Host, ...]:
  """Joins the cluster as a driver; its alive hosts. LaunchError if not."""
  if address != 'auto':
    _check_reachable(address)
  import ray
  try:
    ray.init(address=address, logging_level=logging.ERROR,
             log_to_driver=False, configure_logging=True)
  except Exception as e:
    # ConnectionError, an authentication error, a version mismatch...
    message = ' '.join(str(e).split())[:300] or type(e).__name__
    raise errors.LaunchError(
        f'cannot connect to the Ray cluster at {address}: {message}') from None
  return tuple(Host(n['NodeID'], n['NodeManagerAddress'],
                    dict(n.get('Resources', {})))
               for n in ray.nodes() if n.get('Alive'))


def answers_without_token(gcs_address: str) -> bool:
  """Whether the cluster's GCS at HOST:PORT answers a call that carries no
  Ray token: asked, not read from this process's RAY_AUTH_MODE. A cluster
  started with RAY_AUTH_MODE=token refuses it (UNAUTHENTICATED)."""
  import grpc
  from ray.core.generated import gcs_service_pb2
  from ray.core.generated import gcs_service_pb2_grpc
  with grpc.insecure_channel(gcs_address) as channel:
    stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
    try:
      stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(),
                        timeout=REACH_TIMEOUT_SECONDS * 5)
    except grpc.RpcError as e:
      if e.code() == grpc.StatusCode.UNAUTHENTICATED:
        return False
      raise errors.LaunchError(
          f'cannot ask the Ray cluster at {gcs_address} whether it needs a '
          f'token: {e.code().name}') from None
  return True


def check_token_auth(allow_open: bool) -> None:
  """Refuses (LaunchError) the connected cluster if it answers without a
  token, unless `allow_open`: node servers take unauthenticated calls, and
  whoever reaches an open cluster can also start work on it."""
  import ray
  address = ray.get_runtime_context().gcs_address
  if allow_open or not answers_without_token(address):
    return
  raise errors.LaunchError(
      f'the Ray cluster at {address} answers without a token: anyone who '
      'reaches it can run code on its hosts; start its Ray with '
      'RAY_AUTH_MODE=token (docs/ray-clusters.md), or pass '
      '--allow_open_cluster if nobody else can reach it')


def is_private(ip: str) -> bool:
  try:
    address = ipaddress.ip_address(ip)
  except ValueError:
    return False
  return any(address in network for network in PRIVATE_NETWORKS
             if network.version == address.version)


def check_addresses(hosts: Sequence[Host], allow_public: bool) -> None:
  """Node servers will listen on these: IPv4, and private unless allowed."""
  for host in hosts:
    try:
      version = ipaddress.ip_address(host.ip).version
    except ValueError:
      version = 0
    if version != 4:
      raise errors.LaunchError(
          f'Ray host {host.ip} has no IPv4 cluster address; node servers '
          'bind IPv4 cluster addresses only (start its Ray node with '
          '--node-ip-address=IPV4)')
    if not allow_public and not is_private(host.ip):
      raise errors.LaunchError(
          f'Ray host {host.ip} has a public address: Courier and Reverb '
          'servers have no authentication, so node servers listen only on '
          'private cluster addresses (RFC 1918, loopback, link-local); put '
          'the cluster on a private network, or pass '
          '--allow_public_cluster_address if the network is closed anyway')


def demands(nodes: Sequence[Tuple[str, object]]) -> Tuple[Demand, ...]:
  """(node name, its resources.NodePlacement) -> Ray demand per node."""
  return tuple(Demand(node, placement.group, placement.ray_cpus,
                      len(placement.gpus), placement.ray_memory_mb,
                      tuple(placement.ray_resources))
               for node, placement in nodes)


def _amount(name: str, value: float) -> str:
  if name == 'memory':
    return f'{value / _MB:,.0f} MB of memory'
  number = f'{value:g}'
  if name in ('CPU', 'GPU'):
    return f'{number} {name}' + ('s' if value != 1 else '')
  return f'{number} of {name!r}'


def _fits(demand: Demand, room: Mapping[str, float]) -> bool:
  """Whether `room` (a host's resources, or what is left of them) holds
  `demand`."""
  return all(room.get(k, 0) + 1e-9 >= v
             for k, v in demand.as_resources().items())


def fit(all_demands: Sequence[Demand], hosts: Sequence[Host]) -> Dict[str, str]:
  """Node -> host IP, first fit against each host's total resources.

  A LaunchError names the first node (and its group) that fits nowhere and
  what is missing. Ray's scheduler may pick other hosts among those that
  fit; this proves only that the cluster can hold the whole plan.
  """
  if not hosts:
    raise errors.LaunchError('the Ray cluster has no alive host')
  left = {h.node_id: dict(h.resources) for h in hosts}
  placed: Dict[str, str] = {}
  # Nodes that fewer hosts can run go first (pinned ones before free ones).
  def eligible(demand: Demand) -> List[Host]:
    return [h for h in hosts if _fits(demand, h.resources)]
  for demand in sorted(all_demands, key=lambda d: len(eligible(d))):
    wanted = demand.as_resources()
    who = f'{demand.node} (group {demand.group})'
    candidates = eligible(demand)
    if not candidates:
      for name, value in wanted.items():
        most = max(h.resources.get(name, 0) for h in hosts)
        if most < value:
          have = (f'no host has {name!r}' if most == 0 and name not in (
              'CPU', 'GPU', 'memory') else
                  f'the most any host has is {_amount(name, most)}')
          raise errors.LaunchError(
              f'the Ray cluster cannot hold the plan: {who} needs '
              f'{_amount(name, value)}, and {have}')
      raise errors.LaunchError(
          f'the Ray cluster cannot hold the plan: {who} needs '
          f'{", ".join(_amount(k, v) for k, v in wanted.items())} on one '
          'host, and no host has all of them')
    free = [h for h in candidates if _fits(demand, left[h.node_id])]
    if not free:
      raise errors.LaunchError(
          f'the Ray cluster cannot hold the plan: {who} needs '
          f'{", ".join(_amount(k, v) for k, v in wanted.items())}, and the '
          f'hosts that could run it ({", ".join(h.ip for h in candidates)}) '
          'are full with the nodes placed before it; add hosts or lower '
          'ray_cpus / ray_memory_mb')
    host = max(free, key=lambda h: left[h.node_id].get('CPU', 0))
    for k, v in wanted.items():
      left[host.node_id][k] -= v
    placed[demand.node] = host.ip
  return {d.node: placed[d.node] for d in all_demands}


def copies_that_fit(plans: Sequence[Sequence[Demand]], hosts: Sequence[Host],
                    most: int) -> int:
  """How many programs the hosts hold at once, up to `most`: programs are
  taken from `plans` (each a program's demands) in turn, round and round,
  and each node goes, first fit as `fit` orders them, to the host that it
  fits with the least CPU left (a program's nodes pack onto few hosts).

  Against the hosts' total resources, as `fit`: what other jobs hold is
  not counted.
  """
  left = {h.node_id: dict(h.resources) for h in hosts}
  count = 0
  while count < most and plans:
    plan = plans[count % len(plans)]
    trial = {node: dict(room) for node, room in left.items()}
    for demand in sorted(plan, key=lambda d: sum(
        _fits(d, h.resources) for h in hosts)):
      free = [h for h in hosts if _fits(demand, trial[h.node_id])]
      if not free:
        return count
      host = min(free, key=lambda h: trial[h.node_id].get('CPU', 0))
      for k, v in demand.as_resources().items():
        trial[host.node_id][k] -= v
    left = trial
    count += 1
  return count


def total(plan: Sequence[Demand]) -> Dict[str, float]:
  """What a program's nodes ask of Ray together, in Ray's names."""
  summed: Dict[str, float] = {}
  for demand in plan:
    for k, v in demand.as_resources().items():
      summed[k] = summed.get(k, 0.0) + v
  return summed


def describe_amounts(amounts: Mapping[str, float]) -> str:
  """'5 CPUs, 2,048 MB of memory' for resources in Ray's names."""
  return ', '.join(_amount(k, v) for k, v in amounts.items()) or 'nothing'


def format_fit(cluster: Cluster) -> str:
  """--dry_run: the hosts, and which host each node fits on."""
  lines = [f'Ray cluster at {cluster.address}: {len(cluster.hosts)} hosts']
  for host in cluster.hosts:
    shown = ', '.join(f'{k}={v:g}' for k, v in sorted(host.resources.items())
                      if not k.startswith(('node:', 'object_store_memory',
                                           'memory')))
    lines.append(f'  {host.ip}  {shown}')
  lines.append('\nplacement (first fit; Ray may pick another host that fits):')
  width = max(len(d.node) for d in cluster.demands)
  for demand in cluster.demands:
    wanted = ', '.join(_amount(k, v) for k, v in demand.as_resources().items())
    lines.append(f'  {demand.node:<{width}}  -> {cluster.fit[demand.node]:<15}'
                 f'  needs {wanted or "nothing"}')
  lines.append('\nthe cluster can hold the plan.')
  return '\n'.join(lines)


def wait_for_hosts(address: str, hosts: int, timeout_seconds: float) -> int:
  """Waits until the cluster at `address` has `hosts` alive hosts.

  For scripts that start a cluster and then launch on it
  (scripts/slurm/acme_launch.sbatch): the head may not listen yet, and the
  other hosts join after it. Returns how many hosts joined; LaunchError
  when fewer than `hosts` did by the deadline.
  """
  deadline = time.time() + timeout_seconds
  joined = 0
  while True:
    try:
      joined = len(connect(address))
      break
    except errors.LaunchError as e:
      if time.time() >= deadline:
        raise errors.LaunchError(f'after {timeout_seconds:g} s: {e}') from None
      time.sleep(1.0)
  import ray
  while joined < hosts and time.time() < deadline:
    time.sleep(1.0)
    joined = sum(1 for n in ray.nodes() if n.get('Alive'))
  ray.shutdown()
  if joined < hosts:
    raise errors.LaunchError(
        f'after {timeout_seconds:g} s, {joined} of {hosts} hosts joined the '
        f'Ray cluster at {address}')
  return joined


def main(argv: Sequence[str]) -> int:
  """`python -m acme_launch.run.ray.cluster ADDRESS --hosts=N`: wait_for_hosts."""
  import argparse
  parser = argparse.ArgumentParser(
      prog='python -m acme_launch.run.ray.cluster',
      description='Waits until a Ray cluster has N alive hosts.')
  parser.add_argument('address', help='HOST:PORT of the head')
  parser.add_argument('--hosts', type=int, default=1, help='hosts to wait for')
  parser.add_argument('--timeout', type=float, default=300.0, help='seconds')
  args = parser.parse_args(argv)
  try:
    joined = wait_for_hosts(args.address, args.hosts, args.timeout)
  except errors.LaunchError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(f'{joined} hosts in the Ray cluster at {args.address}')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
