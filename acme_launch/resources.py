"""Per-node resource plan: which GPUs a process sees and how JAX/TF use them.

The plan is data: for every node of the program it holds the Launchpad group
label the node is placed under and the environment variables its process
gets. Launchpad keys `local_resources` by group label only, so nodes whose
environment differs are put under different labels.

This first version places every node on the CPU; the GPU planner extends it.
"""

import dataclasses
from typing import Dict, Mapping, Sequence, Tuple

import ml_collections

GROUPS = ('replay', 'counter', 'learner', 'actor', 'evaluator')


@dataclasses.dataclass(frozen=True)
class NodePlacement:
  """Where one node runs and what its process is told."""
  node: str                 # Logical name, e.g. 'actor/3'.
  group: str                # One of GROUPS.
  label: str                # Launchpad group label the node is added under.
  gpus: Tuple[int, ...]     # Host GPU indices the process sees (may be empty).
  env: Mapping[str, str]    # Environment variables set in its process.


@dataclasses.dataclass(frozen=True)
class ResourcePlan:
  placements: Tuple[NodePlacement, ...]

  def placement(self, node: str) -> NodePlacement:
    for placement in self.placements:
      if placement.node == node:
        return placement
    raise KeyError(node)

  def env_by_label(self) -> Dict[str, Dict[str, str]]:
    """The environment for each Launchpad group label."""
    return {p.label: dict(p.env) for p in self.placements}


def default_resources_config() -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict()


def _cpu_env() -> Dict[str, str]:
  return {
      'CUDA_DEVICE_ORDER': 'PCI_BUS_ID',
      'CUDA_VISIBLE_DEVICES': '',
      'JAX_PLATFORMS': 'cpu',
      'XLA_PYTHON_CLIENT_PREALLOCATE': 'false',
      'TF_CPP_MIN_LOG_LEVEL': '2',
  }


@dataclasses.dataclass(frozen=True)
class GpuInfo:
  index: int        # nvidia-smi / PCI bus order index.
  name: str         # Model, e.g. 'NVIDIA A100-SXM4-80GB'.
  memory_mb: int    # Total memory.


def read_inventory(inventory_path: str = '') -> Tuple[GpuInfo, ...]:
  """GPUs of this machine, or those in an injected JSON file. None yet."""
  del inventory_path
  return ()


def plan_resources(nodes: Sequence[Tuple[str, int]],
                   resources_config: ml_collections.ConfigDict,
                   inventory: Sequence[GpuInfo] = ()) -> ResourcePlan:
  """Places each (group, index) node; every node on the CPU for now."""
  del resources_config, inventory
  placements = tuple(
      NodePlacement(node=f'{group}/{index}', group=group, label=group,
                    gpus=(), env=_cpu_env())
      for group, index in nodes)
  return ResourcePlan(placements)


def format_plan(plan: ResourcePlan) -> str:
  lines = [f'{"node":<14} {"label":<12} {"gpus":<8}']
  for p in plan.placements:
    gpus = ','.join(map(str, p.gpus)) or '-'
    lines.append(f'{p.node:<14} {p.label:<12} {gpus:<8}')
  return '\n'.join(lines)


def configure_process() -> None:
  """Applies in-process settings (TF GPU visibility) from the node's env.

  Called by acme_launch.node_entry before any node code runs.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.set_visible_devices([], 'GPU')
