"""`python launch.py ARGS` as a user runs it, from tests and benchmarks.

The launcher runs in a subprocess of its own from the checkout's root, so
that what is measured or checked is the real command line, its exit code,
its output (LiveOutput reads it while it runs) and its run directory. Needs a checkout (launch.py beside the package).
"""

import contextlib
import os
import subprocess
import sys
import threading
import time

from acme_launch import paths

REPO_ROOT = paths.ROOT
LAUNCH_PY = os.path.join(REPO_ROOT, 'launch.py')


def user_env(extra=None) -> dict:
  """This process's environment as a user's shell would have it: importing
  jax here set TF_CPP_MIN_LOG_LEVEL=1, which a launcher would then keep."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  return {**env, **(extra or {})}


def checkout_on_path(env: dict) -> dict:
  """`env` with this checkout first on PYTHONPATH: a script outside the
  package (bench/) then imports this checkout's package, also where the
  virtualenv holds no editable install of it (scripts/setup.sh makes one)
  or holds another checkout's."""
  path = os.pathsep.join(p for p in (REPO_ROOT, env.get('PYTHONPATH')) if p)
  return {**env, 'PYTHONPATH': path}


def launch_command(*args: str) -> list:
  """The argv of `python launch.py ARGS`, with this process's Python."""
  return [sys.executable, LAUNCH_PY, *args]


def run_launcher(*args: str, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
  """`python launch.py ARGS` from the repo root; output captured as text."""
  return subprocess.run(
      launch_command(*args), cwd=REPO_ROOT, capture_output=True, text=True,
      timeout=timeout, env=user_env(env), check=False)


def start_launcher(*args: str, env=None) -> subprocess.Popen:
  """`python launch.py ARGS` in the background, output captured as text;
  `env`: variables added to the user's environment."""
  return subprocess.Popen(
      launch_command(*args), cwd=REPO_ROOT, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, env=user_env(env))


@contextlib.contextmanager
def killed_on_exit(launcher: subprocess.Popen):
  """Yields `launcher`; kills it on the way out if the caller left it running."""
  try:
    yield launcher
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.communicate()


def wait_for(condition, timeout: float, what: str, interval: float = 0.5):
  """Polls `condition()` until it returns a true value, and returns that;
  TimeoutError after `timeout` seconds."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    value = condition()
    if value:
      return value
    time.sleep(interval)
  raise TimeoutError(f'timed out after {timeout:.0f}s waiting for {what}')


def alive(pids) -> list:
  """The pids among `pids` that are still running (zombies count as gone)."""
  import psutil
  running = []
  for pid in pids:
    try:
      if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        running.append(pid)
    except psutil.NoSuchProcess:
      pass
  return running


class LiveOutput:
  """A launcher's stdout, read as it comes (a thread), and all of it.

  Its stderr is read by a thread too: once this reads the pipes, nothing
  else may (communicate() would take lines from under it)."""

  def __init__(self, launcher: subprocess.Popen):
    self.lines = []
    self._launcher = launcher
    self._stderr = []
    self._threads = [
        threading.Thread(target=lambda: self.lines.extend(
            iter(launcher.stdout.readline, '')), daemon=True),
        threading.Thread(target=lambda: self._stderr.append(
            launcher.stderr.read()), daemon=True)]
    for thread in self._threads:
      thread.start()

  def has(self, text: str) -> bool:
    return any(text in line for line in list(self.lines))

  def text(self) -> str:
    self._threads[0].join(timeout=10)
    return ''.join(self.lines)

  def wait(self, timeout: float) -> str:
    """Waits for the launcher to exit; its stderr."""
    self._launcher.wait(timeout=timeout)
    for thread in self._threads:
      thread.join(timeout=10)
    return ''.join(self._stderr)
