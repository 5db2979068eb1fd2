"""The run directory of a Ray run on hosts that do not share it.

The run directory stays on the launcher's host. A host that sees it (the
marker check in run/ray/launch.py) runs its nodes on it directly, as local_mp
does. A host that does not gets, per node, a private mirror of it (same
layout, in the host's temp dir) made by the node's Ray actor
(ray_host.NodeHost.make_mirror); the node writes there
(layout.on_this_host), and the launcher pulls what it wrote into the run
directory on every round of its watch loop and once more after the nodes
stop, before the summary is written:
  - logs/ and metrics/ (node logs, metrics CSVs, TensorBoard events) only
    grow: the bytes past what was already pulled, appended there;
  - anything else the node writes (nodes/<node>.json, progress.json,
    final_eval.json, stop_request.json, checkpoints/) is pulled whole when
    its size or mtime changed, and removed there when the node removed it
    (old checkpoints). A file that says another one is complete (TF's
    `checkpoint` state file, Reverb's DONE, stop_request.json after
    progress.json) is read first and written last, so the run directory
    never points at a save, or a stop, whose files have not arrived.

Where checkpoints live: the learner, counter and replay nodes write theirs
into checkpoints/ of the run directory they see. On a host that shares it,
that is the run directory itself, as on one machine. On a host that does
not, it is the node's mirror there, and the launcher copies every save into
the run directory's checkpoints/ as it appears and once more after the node
saved at stop; before such a node starts (a first run, --resume,
--auto_resume), the launcher pushes its component's checkpoints/ folder
from the run directory into the new mirror, so it resumes from the same
save wherever Ray places it. Either way the run directory on the
launcher's host holds the run's checkpoints, and --resume reads them there.

Everything travels through Ray calls, as bytes: fine for logs, metrics and
small files; a run with big files to share is better served by a shared
filesystem.
"""

import errno
import os
import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

from acme_launch import layout
from acme_launch import safe_dirs
from acme_launch.plan import node_env
from acme_launch.run import rundir
from acme_launch.plan import topology

_APPENDED = ('logs', 'metrics')     # Top-level folders whose files only grow.
# Files that vouch for others being complete: read first, written last.
_WRITTEN_LAST = ('stop_request.json', 'checkpoint', 'DONE')
CALL_TIMEOUT_SECONDS = 60.0

# (path relative to the run directory, 'append', 'whole' or 'delete', bytes)
Change = Tuple[str, str, bytes]


def _appended(relative: str) -> bool:
  return relative.split(os.sep, 1)[0] in _APPENDED


def _is_temp(relative: str) -> bool:
  """A file being written, to be renamed (write_json_atomic, StopRequest,
  TF's checkpoint state file and its `<prefix>_temp/` shards)."""
  name = os.path.basename(relative)
  return (name.startswith('.') or '.tmp' in name or
          os.path.dirname(relative).endswith('_temp'))


class Mirror:
  """Host side: one node's copy of the run directory, and what it wrote.

  Remembers how much of each file it already handed over, so each `pull`
  returns only what is new.
  """

  def __init__(self):
    self.root = safe_dirs.private_temp_folder('acme-launch-run-',
                                              'mirror of the run directory')
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
    """What the node wrote since the last pull, files that vouch for
    others last (read before those others are listed)."""
    vouching = [f for f in _files(self.root)
                if os.path.basename(f) in _WRITTEN_LAST]
    last = [self._read(f) for f in vouching]
    others = [f for f in _files(self.root) if not _is_temp(f) and
              os.path.basename(f) not in _WRITTEN_LAST]
    changes = [c for c in [self._read(f) for f in others] + last if c]
    present = set(vouching + others)
    for relative in sorted(self._pulled):
      if isinstance(self._pulled[relative], tuple) and relative not in present:
        del self._pulled[relative]
        changes.append((relative, 'delete', b''))
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


def _files(root: str) -> List[str]:
  """Every file under `root`, relative to it."""
  return [os.path.relpath(os.path.join(folder, name), root)
          for folder, _, names in os.walk(root) for name in names]


def _stamp(path: str) -> Tuple[int, int]:
  stat = os.stat(path)
  return stat.st_size, stat.st_mtime_ns


def apply(run_dir: str, changes: List[Change]) -> None:
  """Launcher side: writes a pull's changes into the run directory."""
  for relative, how, data in changes:
    path = os.path.normpath(os.path.join(run_dir, relative))
    if os.path.isabs(relative) or not path.startswith(run_dir + os.sep):
      continue  # Not a path of the run directory.
    if how == 'delete':
      if os.path.exists(path):
        os.unlink(path)
      parent = os.path.dirname(path)
      if (parent != run_dir and os.path.isdir(parent) and
          not os.listdir(parent)):  # An old replay save's folder.
        os.rmdir(parent)
      continue
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if how == 'append':
      try:
        fd = safe_dirs.open_append_nofollow(path)
      except OSError as e:
        if e.errno == errno.ELOOP:
          continue  # Never written through a link (see rundir.take).
        raise
      with os.fdopen(fd, 'ab') as f:
        f.write(data)
    else:
      fd, tmp_path = tempfile.mkstemp(dir=os.path.dirname(path),
                                      prefix='.tmp-')
      with os.fdopen(fd, 'wb') as f:
        f.write(data)
      os.replace(tmp_path, path)


def checkpoint_files(run_dir: str, node: str) -> Dict[str, bytes]:
  """The node's own checkpoints/<component>/ files (none for a node that
  saves nothing), to push into its new mirror."""
  group = topology.group_of(node)
  if group not in topology.STATEFUL_GROUPS:
    return {}
  folder = os.path.join(layout.checkpoints_dir(run_dir), group)
  files = {}
  for relative in (_files(folder) if os.path.isdir(folder) else ()):
    if not _is_temp(relative):
      with open(os.path.join(folder, relative), 'rb') as f:
        files[os.path.join('checkpoints', group, relative)] = f.read()
  return files


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
    one that does not: a mirror there, made now, holding the node's
    checkpoints to resume from.
    """
    self._mirrored.pop(node, None)
    if shared:
      return (node_env.NodeEnv(run_dir=self._run_dir).to_environ(),
              layout.log_path(self._run_dir, node))
    import ray
    files = {**csv_headers(self._run_dir),
             **checkpoint_files(self._run_dir, node)}
    root = ray.get(actor.make_mirror.remote(files),
                   timeout=CALL_TIMEOUT_SECONDS)
    self._mirrored[node] = actor
    return (node_env.NodeEnv(run_dir=root, mirror_of=self._run_dir).to_environ(),
            layout.log_path(root, node))

  def forget(self, node: str) -> None:
    """The node's actor is gone (its host lost): nothing more to pull."""
    self._mirrored.pop(node, None)

  def pull(self, last: bool = False) -> None:
    """Pulls every mirror into the run directory; `last` removes them."""
    import ray
    refs = [actor.pull.remote(last) for actor in self._mirrored.values()]
    for ref in refs:
      try:
        apply(self._run_dir, ray.get(ref, timeout=CALL_TIMEOUT_SECONDS))
      except ray.exceptions.RayError:
        pass  # Its host is gone; the watch loop handles that.
    if last:
      self._mirrored = {}
