"""The slice of this host a launcher plans within: cores, GPUs, folder.

A launcher started by hand plans within its own CPU affinity (`taskset`)
and `CUDA_VISIBLE_DEVICES`, and reads relative paths of its command line
from its working directory. A sweep checks each point's plan as the child
in a slot will see the host: it hands that slot's view to the planner as
this value instead of changing its own process.
"""

import dataclasses
import os
from typing import Optional, Tuple


@dataclasses.dataclass(frozen=True)
class HostSlice:
  cores: Tuple[int, ...]        # The cores node processes may be pinned to.
  visible_gpus: Optional[str]   # CUDA_VISIBLE_DEVICES as given; None: all.
  cwd: str                      # Relative paths on the command line start here.

  @classmethod
  def of_this_process(cls) -> 'HostSlice':
    return cls(tuple(sorted(os.sched_getaffinity(0))),
               os.environ.get('CUDA_VISIBLE_DEVICES'), os.getcwd())
