"""Shared helpers: run the real launcher as a user would, in a subprocess."""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_launcher(*args: str, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
  """`python launch.py ARGS` from the repo root; output captured as text."""
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), *args],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
      env={**os.environ, **(env or {})}, check=False)


def read_json(path: str):
  with open(path) as f:
    return json.load(f)


@pytest.fixture
def workdir(tmp_path):
  path = tmp_path / 'runs'
  path.mkdir()
  return str(path)
