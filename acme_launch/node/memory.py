"""Memory a node process's allocator holds free, handed back to the system.

Writing a Reverb checkpoint allocates and frees, in the replay node's
server threads, about a third of its tables' size. glibc's malloc keeps
freed memory in its arenas for reuse rather than return it, so each
checkpoint left the replay node's resident memory higher: in steps, by
about half its tables' size over eight checkpoints of a full table
(`bench/replay_memory.py`, docs/resources-and-gpus.md). The replay node
calls `release_free_memory` after every checkpoint.
"""

import ctypes
import ctypes.util
import os


def resident_bytes() -> int:
  """This process's resident memory (RSS), 0 where /proc has none."""
  try:
    with open('/proc/self/statm') as f:
      return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
  except (OSError, ValueError, IndexError):
    return 0


def release_free_memory() -> int:
  """glibc's malloc_trim(0): every arena's whole free pages back to the
  system. Returns the bytes this process's RSS fell by (0 where the C
  library has no malloc_trim, that is, not glibc)."""
  try:
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
    trim = libc.malloc_trim
  except (OSError, AttributeError):
    return 0
  trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
  before = resident_bytes()
  trim(0)
  return max(0, before - resident_bytes())
