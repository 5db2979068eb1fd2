"""Slots: the cores (and GPUs) of this host cut among the sweep's programs,
and a child's view of its slot; or, when the points run on a Ray cluster,
as many shares of the cluster as it holds programs at once."""

import dataclasses
import os
from typing import List, Optional, Sequence, Tuple

from acme_launch import errors
from acme_launch.plan import host as host_lib
from acme_launch.plan import node_env


@dataclasses.dataclass(frozen=True)
class Slot:
  index: int
  cores: Tuple[int, ...]
  gpus: Tuple[int, ...]           # Empty: the programs use no GPU.
  # The Ray cluster's address when the points run there: the child
  # launcher runs here on the launcher's cores, its nodes on the cluster.
  cluster: str = ''


def host_capacity(cores: Sequence[int], gpus: Sequence[int],
                  uses_gpus: bool) -> int:
  """Programs this host can run at once: a core each, a GPU each if used."""
  return max(1, min(len(cores), len(gpus)) if uses_gpus and gpus
             else len(cores))


def choose_concurrency(requested: int, points: int, cores: Sequence[int],
                       gpus: Sequence[int], uses_gpus: bool) -> int:
  """--max_concurrent, checked against the host; 0 means the most it holds."""
  capacity = host_capacity(cores, gpus, uses_gpus)
  if requested > len(cores):
    raise errors.LaunchError(
        f'--max_concurrent={requested}: this launcher may use '
        f'{len(cores)} cores, and each program needs at least one')
  if requested > capacity:
    raise errors.LaunchError(
        f'--max_concurrent={requested}: this host has {len(gpus)} GPUs and '
        'each program\'s plan uses at least one')
  return max(1, min(requested or capacity, points))


def make_slots(count: int, cores: Sequence[int], gpus: Sequence[int],
               uses_gpus: bool) -> List[Slot]:
  """`count` disjoint slices of the cores (and GPUs, if used), sizes as
  even as possible."""
  cores, gpus = sorted(cores), sorted(gpus) if uses_gpus else []

  def piece(items, i):
    return tuple(items[i * len(items) // count:(i + 1) * len(items) // count])
  return [Slot(i, piece(cores, i), piece(gpus, i) if gpus else ())
          for i in range(count)]


def cluster_concurrency(requested: int, plans: Sequence[Sequence],
                        hosts: Sequence, address: str) -> Tuple[int, int]:
  """(programs at once, how many the cluster holds) for points that run on
  the Ray cluster at `address`: --max_concurrent, checked against what the
  hosts hold (`plans`: each point's ray_cluster.Demand list)."""
  from acme_launch.run.ray import cluster as ray_cluster
  capacity = ray_cluster.copies_that_fit(plans, hosts, max(requested,
                                                           len(plans)))
  if requested > capacity:
    raise errors.LaunchError(
        f'--max_concurrent={requested}: the Ray cluster at {address} holds '
        f'{capacity} of these programs at once (each asks '
        f'{ray_cluster.describe_amounts(ray_cluster.total(plans[0]))})')
  return max(1, min(requested or capacity, len(plans))), capacity


def cluster_slots(count: int, address: str) -> List[Slot]:
  """`count` shares of the cluster; each child launcher may use this
  launcher's cores (it only supervises: its nodes run on the cluster)."""
  cores = tuple(sorted(host_cores_now()))
  return [Slot(i, cores, (), address) for i in range(count)]


def describe_slot(slot: Slot) -> str:
  if slot.cluster:
    return f'the Ray cluster at {slot.cluster}'
  gpus = ','.join(map(str, slot.gpus)) if slot.gpus else 'none'
  return f'cores {node_env.format_cores(slot.cores)}, GPUs {gpus}'


def host_cores_now() -> List[int]:
  return list(host_lib.HostSlice.of_this_process().cores)


def host_gpus_now(inventory_path: str) -> Tuple[int, ...]:
  from acme_launch.plan import gpu_inventory
  visible = host_lib.HostSlice.of_this_process().visible_gpus
  return tuple(g.index for g in gpu_inventory.read_inventory(inventory_path,
                                                             visible))


def slot_view(slot: Slot, cwd: Optional[str]) -> host_lib.HostSlice:
  """The host as a child in `slot` will see it: the slot's cores, its GPUs
  (or the launcher's own visible ones), and the sweep's working directory."""
  own = host_lib.HostSlice.of_this_process()
  visible = (','.join(map(str, slot.gpus)) if slot.gpus
             else own.visible_gpus)
  return host_lib.HostSlice(tuple(slot.cores), visible,
                            cwd if cwd and os.path.isdir(cwd) else own.cwd)
