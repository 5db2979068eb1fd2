"""A run directory read back by tests and benchmarks, through layout.py.

Read while the program runs: a file not written yet reads as nothing, not
as an error, so a caller can poll (every JSON the run writes is written
atomically, so what is there is whole).
"""

import json
import os
from typing import Dict

from acme_launch import layout


def read_json(path: str):
  """The JSON at `path`; a missing or broken file raises (a test's check)."""
  with open(path) as f:
    return json.load(f)


def actor_steps(run_dir: str) -> int:
  """The counter's actor steps as the steps limiter last wrote them to
  progress.json; 0 before it first did."""
  progress = layout.read_json(layout.progress_path(run_dir), {}) or {}
  return int(progress.get('counts', {}).get('actor_steps', 0))


def node_records(run_dir: str) -> Dict[str, dict]:
  """Node name -> what its process recorded in nodes/<node>.json; {} before
  any node started."""
  nodes_dir = layout.nodes_dir(run_dir)
  if not os.path.isdir(nodes_dir):
    return {}
  records = {}
  for name in sorted(os.listdir(nodes_dir)):
    if name.startswith('.') or not name.endswith('.json'):
      continue  # A record being written (write_json_atomic's temp file).
    record = layout.read_json(os.path.join(nodes_dir, name))
    if isinstance(record, dict) and 'pid' in record and 'node' in record:
      records[record['node']] = record
  return records


def node_pids(run_dir: str) -> Dict[str, int]:
  """Node name -> pid, as each node process recorded itself in nodes/."""
  return {node: record['pid'] for node, record in node_records(run_dir).items()}
