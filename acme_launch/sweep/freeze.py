"""A program held still between its turns on a slot (trials.MemberTrial).

A population member's program is frozen at a boundary: its child launcher
and every process under it (the fork server, the nodes, which run in
sessions of their own) get SIGSTOP, so nothing of it runs and nothing it
holds is lost: its replay, its learner, the compiled JAX functions. The
slot's cores go to the next member. After the comparison it gets SIGCONT,
on the slot it takes then: each of its threads is moved from the cores of
its old slot to those of its new one, place for place (a node pinned to
the second core of its slot goes to the second core of the new one; with
slots of uneven size, to the core as far along it). A node restarted after
that pins itself to its planned cores, on the slot its program started on:
the member's trial moves it at its next report (trials.MemberTrial).

The tree is read from /proc (each process's parent), the launcher first:
stopped, it starts no new node while the rest are found.
"""

import os
import signal
import time
from typing import Dict, List, Sequence, Set

STOP_WAIT_SECONDS = 5.0


def _parents() -> Dict[int, int]:
  """pid -> parent pid of every process visible here."""
  parents = {}
  for entry in os.listdir('/proc'):
    if not entry.isdigit():
      continue
    try:
      with open(f'/proc/{entry}/stat') as f:
        stat = f.read()
    except OSError:
      continue  # Ended meanwhile.
    # The command name, in brackets, may hold spaces and brackets.
    fields = stat[stat.rindex(')') + 2:].split()
    parents[int(entry)] = int(fields[1])
  return parents


def tree(root: int) -> List[int]:
  """`root` and every process under it, parents before children."""
  children: Dict[int, List[int]] = {}
  for pid, parent in _parents().items():
    children.setdefault(parent, []).append(pid)
  found, queue = [], [root]
  while queue:
    pid = queue.pop(0)
    found.append(pid)
    queue.extend(sorted(children.get(pid, ())))
  return found


def _state(pid: int) -> str:
  try:
    with open(f'/proc/{pid}/stat') as f:
      stat = f.read()
  except OSError:
    return ''
  return stat[stat.rindex(')') + 2:].split()[0]


def _signal(pids: Sequence[int], signum: int) -> None:
  for pid in pids:
    try:
      os.kill(pid, signum)
    except ProcessLookupError:
      pass


def stop(root: int) -> List[int]:
  """Stops `root`'s whole tree; its pids, each stopped (or ended) when
  this returns. The tree is read again only once those signalled are in
  state T: a signalled process may still fork until the stop lands, and
  a child forked then is found by the next read."""
  stopped: List[int] = []
  deadline = time.time() + STOP_WAIT_SECONDS
  while True:
    more = [p for p in tree(root) if p not in stopped]
    if not more:
      break
    _signal(more, signal.SIGSTOP)
    stopped += more
    while time.time() < deadline and any(
        _state(p) not in ('T', 'Z', 'X', '') for p in more):
      time.sleep(0.01)
  return stopped


def cont(pids: Sequence[int]) -> None:
  """Lets a stopped tree run again, children first: the launcher last,
  so that it finds its nodes running."""
  _signal(list(reversed(pids)), signal.SIGCONT)


def moved(cores: Set[int], old: Sequence[int],
          new: Sequence[int]) -> Set[int]:
  """A thread's cores once moved from the slot `old` to `new`: the whole
  old slot becomes the whole new one; a core of it, the core in the same
  place along the new slot (slots may differ in size: 16 cores in 3 slots
  are 5, 5 and 6); a core outside `old` stays."""
  if set(old) <= cores:
    return (cores - set(old)) | set(new)
  place = {c: new[i * len(new) // len(old)] for i, c in enumerate(old)}
  return {place.get(c, c) for c in cores}


def move(pids: Sequence[int], old: Sequence[int], new: Sequence[int]) -> None:
  """Each thread of `pids` from the cores `old` to `new` (moved)."""
  if tuple(old) == tuple(new):
    return
  for pid in pids:
    try:
      threads = os.listdir(f'/proc/{pid}/task')
    except OSError:
      continue
    for tid in map(int, threads):
      try:
        cores = os.sched_getaffinity(tid)
        os.sched_setaffinity(tid, moved(cores, old, new))
      except OSError:
        pass  # The thread ended.
