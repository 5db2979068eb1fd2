"""Files replaced whole and durably: temp file, fsync, rename, fsync the folder.

A reader sees the old file or the new one, never half of one (the rename),
and after a power loss or a kernel crash the file holds what was last
written whole (the fsyncs: without them, a rename can reach the disk before
the data it names, leaving an empty file). Used for the files a resume or
the launcher trusts: checkpoint digests, progress.json, tracking.json.
`sync` makes what another writer wrote durable the same way (TF's and
Reverb's checkpoint files, which neither fsyncs).

The temp file is `.<name>.tmp-XXXX` beside the target: a leading dot, which
readers of a folder (testing/rundir.py, run/ray/files.py) skip.
"""

import json
import os
import tempfile
from typing import Any, Iterable, Union


def _fsync(path: str) -> None:
  flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0)
  fd = os.open(path, flags)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _fsync_folder(folder: str) -> None:
  _fsync(folder or '.')


def sync(paths: Iterable[str]) -> None:
  """fsyncs each file and folder of `paths` (a folder: its entries, not
  its files' data); OSError as the system reports it."""
  for path in paths:
    _fsync(path)


def write_atomic(path: str, data: Union[bytes, str]) -> None:
  """Replaces `path` with `data` (bytes, or text as UTF-8), durably."""
  folder = os.path.dirname(path)
  fd, tmp_path = tempfile.mkstemp(
      dir=folder or None, prefix=f'.{os.path.basename(path)}.tmp-')
  try:
    with os.fdopen(fd, 'wb') as f:
      f.write(data.encode() if isinstance(data, str) else data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp_path, path)
  except BaseException:
    if os.path.exists(tmp_path):
      os.unlink(tmp_path)
    raise
  _fsync_folder(folder)


def write_json(path: str, data: Any) -> None:
  """`data` as JSON (indented, keys sorted, other types as str) at `path`,
  replaced whole and durably (write_atomic)."""
  write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))
