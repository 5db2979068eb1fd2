"""New rows of the run's metrics/*.csv files, from where the last read ended.

Each node appends to its own CSV (program/nodes.py MetricsLogger); this
reads only complete lines past a byte offset per file, so a row being
written is read at the next poll, and the offsets (kept in tracking.json
by run.py) make a resumed launcher start after the rows already sent.
"""

import csv
import dataclasses
import glob
import math
import os
from typing import Dict, List, Optional

# A row's x value for the trackers: the actor steps when it has them.
STEP_KEY = 'actor_steps'
TIME_KEY = 'wall_time'


@dataclasses.dataclass
class Row:
  """One CSV row as numbers: `node` prefixes its metric names."""
  node: str                    # File stem: actor_0, learner, progress, ...
  values: Dict[str, float]     # Numeric columns, wall_time left out.
  step: int                    # actor_steps, or the row's number in its file.
  time: Optional[float]        # wall_time (seconds since the epoch).


@dataclasses.dataclass
class FileState:
  offset: int = 0   # Bytes consumed, the header included.
  rows: int = 0     # Rows read before that offset.


def _number(text: str) -> Optional[float]:
  if text in ('', None):
    return None
  try:
    return float(text)
  except ValueError:
    return None  # A list or text column: not a scalar metric.


class MetricsFollower:
  """Reads the rows added to `metrics_dir`/*.csv since the last call."""

  def __init__(self, metrics_dir: str,
               files: Optional[Dict[str, dict]] = None):
    self._dir = metrics_dir
    self.files: Dict[str, FileState] = {
        name: FileState(**state) for name, state in (files or {}).items()}
    self._headers: Dict[str, List[str]] = {}

  def state(self) -> Dict[str, dict]:
    """What tracking.json keeps: per file, offset and rows."""
    return {name: dataclasses.asdict(s) for name, s in sorted(self.files.items())}

  def new_rows(self) -> List[Row]:
    rows = []
    for path in sorted(glob.glob(os.path.join(self._dir, '*.csv'))):
      rows.extend(self._read(path))
    return rows

  def _read(self, path: str) -> List[Row]:
    name = os.path.basename(path)
    state = self.files.setdefault(name, FileState())
    try:
      with open(path, 'rb') as f:
        f.seek(state.offset)
        data = f.read()
    except OSError:
      return []
    end = data.rfind(b'\n')
    if end < 0:
      return []  # No complete line yet.
    chunk = data[:end + 1].decode('utf-8', errors='replace')
    lines = chunk.splitlines()
    if state.offset == 0:
      self._headers[name] = next(csv.reader(lines[:1]), [])
      lines = lines[1:]
    header = self._headers.get(name)
    if header is None:
      header = self._headers[name] = self._header_of(path)
    node = os.path.splitext(name)[0]
    rows = []
    for fields in csv.reader(lines):
      if not fields:
        continue
      state.rows += 1
      values = {}
      for key, text in zip(header, fields):
        value = _number(text)
        if value is not None:
          values[key] = value
      time = values.pop(TIME_KEY, None)
      step = values.get(STEP_KEY)
      step = int(step) if step is not None and math.isfinite(step) else state.rows
      rows.append(Row(node, values, step, time))
    state.offset += end + 1
    return rows

  @staticmethod
  def _header_of(path: str) -> List[str]:
    with open(path, newline='') as f:
      return next(csv.reader(f), [])
