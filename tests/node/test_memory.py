"""Freed memory handed back to the system (the replay node does it after
each Reverb checkpoint)."""

import subprocess
import sys
import textwrap

from acme_launch.node import memory

from tests.conftest import REPO_ROOT


def test_resident_bytes_reads_this_process():
  assert memory.resident_bytes() > 10 * 2**20  # Python and pytest, at least.


def test_freed_memory_below_a_live_allocation_is_returned():
  """In a fresh Python: 200 MB in 1 KB blocks (malloc's, not Python's
  small-object pool), one more kept alive above them, the rest freed. glibc
  keeps the freed blocks (the live one pins the top of its heap);
  release_free_memory hands them back."""
  script = textwrap.dedent('''
      from acme_launch.node import memory
      blocks = [bytearray(1024) for _ in range(200_000)]
      keep = bytearray(1024)
      del blocks
      held = memory.resident_bytes()
      released = memory.release_free_memory()
      print(held, released, memory.resident_bytes())
  ''')
  result = subprocess.run([sys.executable, '-c', script], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60,
                          check=True)
  held, released, after = map(int, result.stdout.split())
  assert released > 150 * 2**20, (held, released, after)
  assert after < held - 150 * 2**20
