"""The run directory of a Ray run on hosts that do not share it.

The run directory stays on the launcher's host. A host that sees it (the
marker check in ray_launch.py) runs its nodes on it directly, as local_mp
does. A host that does not gets, per node, a private mirror of it (same
layout, in the host's temp dir) made by the node's Ray actor
(ray_host.NodeHost.make_mirror); the node writes there
(rundir.on_this_host), and the launcher pulls what it wrote into the run
directory on every round of its watch loop and once more after the nodes
stop, before the summary is written:
  - logs/ and metrics/ (node logs, metrics CSVs, TensorBoard events) only
    grow: the bytes past what was already pulled, appended there;
  - anything else the node writes (nodes/<node>.json, progress.json,
    final_eval.json, stop_request.json) is pulled whole when its size or
    mtime changed. stop_request.json is read first and written last, so the
    launcher never sees the stop before the progress written ahead of it.
Checkpoints are not pulled yet: a stateful node on such a host keeps them
in its mirror, which goes with the run.

Everything travels through Ray calls, as bytes: fine for logs, metrics and
small files; a run with big files to share is better served by a shared
filesystem.
"""

import os
import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

from acme_launch import rundir

_APPENDED = ('logs', 'metrics')     # Top-level folders whose files only grow.
_NOT_PULLED = ('checkpoints',)
# Files another file's presence vouches for: read first, written last.
_WRITTEN_LAST = ('stop_request.json',)
CALL_TIMEOUT_SECONDS = 60.0

# (path relative to the run directory, 'append' or 'whole', bytes)
Change = Tuple[str, str, bytes]


def _appended(relative: str) -> bool:
  return relative.split(os.sep, 1)[0] in _APPENDED


def _is_temp(name: str) -> bool:
  """A file being written through a rename (write_json_atomic, StopRequest)."""
  return name.startswith('.') or name.endswith('.tmp')


class Mirror:
  """Host side: one node's copy of the run directory, and what it wrote.

  Remembers how much of each file it already handed over, so each `pull`
  returns only what is new.
  """

  def __init__(self):
    self.root = tempfile.mkdtemp(prefix='acme-launch-run-')
    rundir.create(self.root)
    self._pulled: Dict[str, object] = {}  # Offset, or (size, mtime_ns).

  def receive(self, files: Dict[str, bytes]) -> None:
    """Writes files the launcher pushed; they count as already pulled."""
    for relative, data in files.items():
      path = os.path.join(self.root, relative)
      os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
      with open(path, 'wb') as f:
        f.write(data)
      self._pulled[relative] = (len(data) if _appended(relative)
                                else _stamp(path))

  def pull(self) -> List[Change]:
    """What the node wrote since the last pull."""
    files = []
    for folder, dirs, names in os.walk(self.root):
      if folder == self.root:
        dirs[:] = [d for d in dirs if d not in _NOT_PULLED]
      files += [os.path.relpath(os.path.join(folder, n), self.root)
                for n in names if not _is_temp(n)]
    files.sort(key=lambda f: os.path.basename(f) not in _WRITTEN_LAST)
    changes = []
    for relative in files:
      change = self._read(relative)
      if change:
        changes.append(change)
    changes.sort(key=lambda c: os.path.basename(c[0]) in _WRITTEN_LAST)
    return changes

  def _read(self, relative: str) -> Optional[Change]:
    path = os.path.join(self.root, relative)
    try:
      with open(path, 'rb') as f:
        if _appended(relative):
          offset = self._pulled.get(relative, 0)
          f.seek(offset)
          data = f.read()
          self._pulled[relative] = offset + len(data)
          return (relative, 'append', data) if data else None
        stamp = _stamp(path)
        if self._pulled.get(relative) == stamp:
          return None
        data = f.read()
        self._pulled[relative] = stamp
        return relative, 'whole', data
    except OSError:
      return None  # Gone meanwhile.

  def remove(self) -> None:
    shutil.rmtree(self.root, ignore_errors=True)


def _stamp(path: str) -> Tuple[int, int]:
  stat = os.stat(path)
  return stat.st_size, stat.st_mtime_ns


def apply(run_dir: str, changes: List[Change]) -> None:
  """Launcher side: writes a pull's changes into the run directory."""
  for relative, how, data in changes:
    path = os.path.normpath(os.path.join(run_dir, relative))
    if os.path.isabs(relative) or not path.startswith(run_dir + os.sep):
      continue  # Not a path of the run directory.
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if how == 'append':
      with open(path, 'ab') as f:
        f.write(data)
    else:
      fd, tmp_path = tempfile.mkstemp(dir=os.path.dirname(path),
                                      prefix='.tmp-')
      with os.fdopen(fd, 'wb') as f:
        f.write(data)
      os.replace(tmp_path, path)


def csv_headers(run_dir: str) -> Dict[str, bytes]:
  """The first line of each metrics CSV of the run directory.

  Pushed into a new mirror so that a node resumed or restarted there
  appends rows under the header its CSV already has (MetricsLogger writes
  one only into an empty file), as it would on a shared filesystem.
  """
  headers = {}
  folder = os.path.join(run_dir, 'metrics')
  for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
    if name.endswith('.csv'):
      with open(os.path.join(folder, name), 'rb') as f:
        first = f.readline()
      if first.endswith(b'\n'):
        headers[os.path.join('metrics', name)] = first
  return headers


class Shipping:
  """Launcher side: which nodes write into a mirror, and pulling from them."""

  def __init__(self, run_dir: str):
    self._run_dir = run_dir
    self._mirrored: Dict[str, object] = {}  # Node -> its NodeHost actor.

  def place(self, node: str, actor, shared: bool) -> Tuple[Dict[str, str], str]:
    """The node's run-directory env and log path on its actor's host.

    On a host that shares the run directory: the run directory itself. On
    one that does not: a mirror there, made now.
    """
    self._mirrored.pop(node, None)
    if shared:
      return ({'ACME_LAUNCH_RUN_DIR': self._run_dir},
              rundir.log_path(self._run_dir, node))
    import ray  # pylint: disable=g-import-not-at-top
    root = ray.get(actor.make_mirror.remote(csv_headers(self._run_dir)),
                   timeout=CALL_TIMEOUT_SECONDS)
    self._mirrored[node] = actor
    return ({'ACME_LAUNCH_RUN_DIR': root,
             rundir.MIRROR_OF_ENV: self._run_dir},
            rundir.log_path(root, node))

  def forget(self, node: str) -> None:
    """The node's actor is gone (its host lost): nothing more to pull."""
    self._mirrored.pop(node, None)

  def pull(self, last: bool = False) -> None:
    """Pulls every mirror into the run directory; `last` removes them."""
    import ray  # pylint: disable=g-import-not-at-top
    refs = [actor.pull.remote(last) for actor in self._mirrored.values()]
    for ref in refs:
      try:
        apply(self._run_dir, ray.get(ref, timeout=CALL_TIMEOUT_SECONDS))
      except ray.exceptions.RayError:
        pass  # Its host is gone; the watch loop handles that.
    if last:
      self._mirrored = {}
