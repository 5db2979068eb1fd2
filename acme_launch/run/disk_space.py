"""Free space for checkpoints: checked before a run starts and while it runs.

A checkpoint that cannot be written stops its node (program/checkpointing.py); this
guard acts earlier, while there is still room: a run refuses to start, or is
stopped with its checkpoints saved, when the run directory's filesystem (and
the checkpoints folder's, when that is another one) has less free space than
`max(floor, twice the newest checkpoints)`.
"""

import glob
import os
import shutil
from typing import Tuple

from acme_launch import layout

CHECK_EVERY_SECONDS = 5.0


def _size(path: str) -> int:
  if os.path.isfile(path):
    return os.path.getsize(path)
  total = 0
  for root, _, files in os.walk(path):
    total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                 if os.path.isfile(os.path.join(root, f)))
  return total


def newest_checkpoints_bytes(run_dir: str) -> int:
  """Bytes of the newest learner, counter and replay checkpoints together."""
  total = 0
  for component in layout.COMPONENTS:
    indexes = sorted(glob.glob(os.path.join(
        layout.component_dir(run_dir, component), 'ckpt-*.index')),
        key=os.path.getmtime)
    if indexes:
      total += sum(_size(p) for p in glob.glob(indexes[-1][:-len('index')] + '*'))
  replays = layout.complete_replay_checkpoints(
      layout.component_dir(run_dir, 'replay'))
  if replays:
    total += _size(replays[-1])
  return total


def free_and_needed(run_dir: str, floor_bytes: int) -> Tuple[str, int, int]:
  """(the tightest path, its free bytes, bytes the guard wants free)."""
  paths = [run_dir]
  checkpoints = layout.checkpoints_dir(run_dir)
  if os.path.isdir(checkpoints):
    paths.append(checkpoints)
  path = min(paths, key=lambda p: shutil.disk_usage(p).free)
  needed = max(floor_bytes, 2 * newest_checkpoints_bytes(run_dir))
  return path, shutil.disk_usage(path).free, needed


def shortage(run_dir: str, floor_bytes: int) -> str:
  """'' when there is room; else the line saying where and how much."""
  if floor_bytes <= 0:
    return ''
  path, free, needed = free_and_needed(run_dir, floor_bytes)
  if free >= needed:
    return ''
  return (f'only {free / 2**20:,.0f} MB free on the filesystem of {path}; '
          f'checkpoints need about {needed / 2**20:,.0f} MB free '
          '(--disk_guard_mb, or twice the newest checkpoints)')
