"""Checkpoints at fixed paths in the run directory, and resume from them.

    <run_dir>/checkpoints/learner/   TF checkpointer (tf.train.Checkpoint +
    <run_dir>/checkpoints/counter/   CheckpointManager), Acme Saveables inside
    <run_dir>/checkpoints/replay/    Reverb checkpoints, one folder each

Acme's own runners add a per-process uid to the checkpoint path, so learner
and counter land in unrelated folders and nothing resumes, and Reverb's
default checkpointer writes to a new temp dir each run. Here every component
saves under a fixed folder, restores the newest good save when it starts, and
saves once more when the program stops.

With --launch_type=ray, a node on a host that does not share the run
directory writes these folders into its mirror of it there
(layout.on_this_host); run/ray/files.py copies its saves into the run directory
on the launcher's host and pushes them back before such a node starts, so
the launcher's run directory holds every run's checkpoints in both cases.

This module is the node half: the classes below run inside the node
processes. The launcher half, run/resume.py, reads every checkpoint a run
may restore before any process starts.
"""

import errno
import glob
import hashlib
import os
import pickle
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from absl import logging
from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme.tf import savers as tf_savers
from acme.utils import counting
import jax
import launchpad as lp
from launchpad import address as lp_address
import ml_collections
import numpy as np
import reverb
import tensorflow as tf

from acme_launch import durable
from acme_launch import layout
from acme_launch.node import memory

class CheckpointWriteError(RuntimeError):
  """A save failed (disk full, folder unwritable): the node stops with it.

  The message names the folder, the system's reason and the last good
  checkpoint, which stays as it was: a failed save never replaces it.
  """


# One TF checkpoint write or read at a time in a process: under local_mt the
# learner's and the counter's run in threads of one process, and TF 2.8's
# saver crashed (SIGSEGV in functional_saver.save) with two at once.
_TF_CHECKPOINT_LOCK = threading.Lock()

_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                 errno.EPERM, errno.ENOTDIR, errno.ENOENT, errno.EFBIG, errno.EIO)


def _reason(error: BaseException) -> str:
  """The system's reason for a failed write, without TF's graph trace."""
  if isinstance(error, OSError) and error.strerror:
    return error.strerror
  text = getattr(error, 'message', '') or str(error)
  for code in _WRITE_ERRNOS:
    if os.strerror(code) in text:
      return os.strerror(code)
  lines = [line.strip() for line in text.splitlines()
           if line.strip() and not line.strip().startswith('[[')]
  return ' '.join((lines[-1] if lines else type(error).__name__).split())[:300]


def state_digest(state: Any) -> str:
  """sha256 over every array of a saved state (params, optimizer, ...)."""
  digest = hashlib.sha256()
  for leaf in jax.tree_util.tree_leaves(state):
    array = np.asarray(leaf)
    digest.update(str((array.dtype, array.shape)).encode())
    digest.update(np.ascontiguousarray(array).tobytes())
  return digest.hexdigest()


class Checkpointer:
  """An Acme Saveable saved by TF's checkpointer under one fixed folder.

  Saves at most every `interval_minutes` (or when forced) and keeps
  `max_to_keep` saves. TF writes the data files before it updates the
  `checkpoint` state file, so a save cut short never becomes the latest one;
  here its files are then fsynced (TF does not), and a resume falls back to
  the previous save if the newest does not read (run/resume.py).
  Each save also leaves `<prefix>.digest` (sha256 of the saved arrays),
  written whole and durably, so a resume can be checked for exactness.
  """

  def __init__(self, saveable: core.Saveable, directory: str,
               checkpoint_config: ml_collections.ConfigDict):
    self._saveable = _Snapshot(saveable)
    self._checkpoint = tf.train.Checkpoint(
        state=tf_savers.SaveableAdapter(self._saveable))
    self._manager = tf.train.CheckpointManager(
        self._checkpoint, directory, max_to_keep=checkpoint_config.max_to_keep)
    self._interval_seconds = 60.0 * checkpoint_config.interval_minutes
    self._last_saved = time.time()

  def restore(self) -> Optional[str]:
    """Restores the newest readable save, falling back to older ones."""
    for path in reversed(self._manager.checkpoints):
      try:
        with _TF_CHECKPOINT_LOCK:
          self._checkpoint.restore(path).assert_existing_objects_matched()
      except (tf.errors.OpError, ValueError, pickle.UnpicklingError) as e:
        logging.warning('Checkpoint %s is unreadable (%s); trying an older one.',
                        path, e)
        continue
      logging.info('Restored checkpoint %s', path)
      return path
    return None

  def save(self, force: bool = False) -> Optional[str]:
    if not force and time.time() - self._last_saved < self._interval_seconds:
      return None
    state = self._saveable.take()
    try:
      with _TF_CHECKPOINT_LOCK:
        path = self._manager.save()  # Writes `state`, the one digested here.
      # TF fsyncs none of it: its files, its state file and the folder,
      # then the digest, replaced whole and durably.
      directory = self._manager.directory
      durable.sync([*glob.glob(glob.escape(path) + '.*'),
                    os.path.join(directory, 'checkpoint'), directory])
      durable.write_atomic(path + '.digest', state_digest(state))
    except (OSError, tf.errors.OpError) as e:
      raise CheckpointWriteError(
          f'cannot save a checkpoint in {self._manager.directory}: '
          f'{_reason(e)}; the last good checkpoint is kept: '
          f'{self._manager.latest_checkpoint or "none yet"}') from e
    finally:
      self._saveable.release()
    self._last_saved = time.time()
    kept = set(self._manager.checkpoints)  # It deletes old saves, not digests.
    for name in os.listdir(self._manager.directory):
      prefix = os.path.join(self._manager.directory, name[:-len('.digest')])
      if name.endswith('.digest') and prefix not in kept:
        try:
          os.remove(os.path.join(self._manager.directory, name))
        except OSError:
          pass
    logging.info('Saved checkpoint %s', path)
    return path


class _Snapshot(core.Saveable):
  """A Saveable whose state is taken once per save.

  TF's checkpointer asks for the state while it writes; a learner stepping
  in another thread could change it between that and the state we digest.
  With a state taken, both are the same object.
  """

  def __init__(self, saveable: core.Saveable):
    self._saveable = saveable
    self._taken = None

  def take(self):
    self._taken = self._saveable.save()
    return self._taken

  def release(self) -> None:
    self._taken = None

  def save(self):
    return self._saveable.save() if self._taken is None else self._taken

  def restore(self, state) -> None:
    self._saveable.restore(state)


def _token(request: Any) -> Optional[str]:
  return str(request['token']) if isinstance(request, dict) and request.get(
      'token') else None


class CheckpointedLearner(core.Worker, core.VariableSource):
  """Steps a learner, saving on schedule and once more when it stops.

  The steps run in a daemon thread while `run` waits for the stop event: a
  step blocked on Reverb sits in C code, where neither a signal handler nor
  an exception can reach it, even after the replay server is gone. On stop,
  `run` saves the state of the last finished step (a step replaces the
  learner's state only when it completes) and returns.
  After a restore it writes nodes/learner_restore.json with the restored
  checkpoint and the digest of the state it now holds.
  """

  def __init__(self, learner: core.Learner, run_dir: str,
               checkpoint_config: ml_collections.ConfigDict):
    self._learner = learner
    run_dir = layout.on_this_host(run_dir)
    self._checkpointer = Checkpointer(
        learner, layout.component_dir(run_dir, 'learner'), checkpoint_config)
    self._request_path = layout.learner_save_request_path(run_dir)
    self._saved_path = layout.learner_saved_path(run_dir)
    self._answered = _token(layout.read_json(self._saved_path))
    self._save_lock = threading.Lock()
    self._step_error: Optional[BaseException] = None
    restored = self._checkpointer.restore()
    if restored:
      layout.write_json_atomic(
          os.path.join(layout.nodes_dir(run_dir), 'learner_restore.json'),
          {'checkpoint': restored, 'digest': state_digest(learner.save())})

  def get_variables(self, names: List[str]) -> List[Any]:
    return self._learner.get_variables(names)

  def _step_until(self, stop: threading.Event) -> None:
    try:
      while not stop.is_set():
        self._learner.step()
        with self._save_lock:
          self._checkpointer.save()
    except Exception as e:
      self._step_error = e

  def run(self) -> None:
    stop = lp.stop_event()
    stepper = threading.Thread(target=self._step_until, args=(stop,),
                               name='learner_steps', daemon=True)
    stepper.start()
    while not stop.wait(0.5) and stepper.is_alive():
      self._save_if_asked()
    with self._save_lock:
      self._checkpointer.save(force=True)
    if self._step_error is not None and not stop.is_set():
      raise self._step_error


  def _save_if_asked(self) -> None:
    """A save now, when the run directory holds a request not answered
    yet (layout.learner_save_request_path): a population's member that
    another copies has its learner saved as it is at the comparison."""
    token = _token(layout.read_json(self._request_path))
    if not token or token == self._answered:
      return
    with self._save_lock:
      path = self._checkpointer.save(force=True)
    layout.write_json_atomic(self._saved_path,
                             {'token': token, 'checkpoint': path})
    self._answered = token


class CheckpointedCounter(counting.Counter):
  """The central counter: restored at start, saved on schedule and at stop.

  Given `watch` (the program's steps limiter, program/nodes.StepsLimiter),
  its node process also hands `watch` a copy of the counts every
  `watch_seconds` while it serves them.
  """

  def __init__(self, run_dir: str,
               checkpoint_config: ml_collections.ConfigDict,
               watch: Optional[Callable[[Dict[str, Any]], None]] = None,
               watch_seconds: float = 0.25):
    super().__init__()
    run_dir = layout.on_this_host(run_dir)
    self._checkpointer = Checkpointer(
        self, layout.component_dir(run_dir, 'counter'), checkpoint_config)
    self._checkpointer.restore()
    self._watch = watch
    self._watch_seconds = watch_seconds

  def run(self) -> None:
    stop = lp.stop_event()
    while not stop.wait(self._watch_seconds if self._watch else 1.0):
      if self._watch:
        with self._lock:  # Copied whole: courier threads add keys meanwhile.
          counts = dict(self._counts)
        self._watch(counts)
      self._checkpointer.save()
    # The totals it stops with, in progress.json as in the last save: the
    # summary then reports the steps a resume restores.
    with self._lock:
      counts = dict(self._counts)
    if self._watch:
      self._watch(counts)
    self._checkpointer.save(force=True)


class ReplayNode(lp.ReverbNode):
  """A Reverb node that checkpoints its tables and stops its server at the end.

  Launchpad's ReverbNode never checkpoints and leaves its server running when
  the program stops (a learner blocked on sampling then never returns). This
  one restores the newest complete checkpoint under checkpoints/replay at
  start (Reverb's DefaultCheckpointer does that), saves every
  `interval_minutes` and once more on stop, then stops the server. Reverb's
  server keeps its newest save and deletes the older ones itself (its
  checkpoint call asks for one kept), so `max_to_keep` is the learner's and
  counter's only; the dry run says so. It records the restored item count
  in nodes/replay_restore.json.
  """

  def __init__(self, priority_tables_fn, run_dir: str,
               checkpoint_config: ml_collections.ConfigDict):
    super().__init__(priority_tables_fn)
    self._run_dir = run_dir
    self._enabled = checkpoint_config.replay
    self._interval_seconds = 60.0 * checkpoint_config.interval_minutes

  def run(self) -> None:
    self._run_dir = layout.on_this_host(self._run_dir)  # In its process.
    replay_dir = layout.component_dir(self._run_dir, 'replay')
    checkpointer = (reverb.checkpointers.DefaultCheckpointer(replay_dir)
                    if self._enabled else None)
    address = self._address.resolve()
    port = lp_address.get_port_from_address(address)
    server = reverb.Server(tables=self._priority_tables_fn(), port=port,
                           checkpointer=checkpointer)
    # Its own address: 'localhost:PORT' under local_mp; on a Ray host the
    # server listens on the host's cluster address only (run/loopback.py).
    client = reverb.Client(address)
    layout.write_json_atomic(
        os.path.join(layout.nodes_dir(self._run_dir), 'replay_restore.json'),
        {'table_sizes': {name: info.current_size
                         for name, info in client.server_info().items()}})
    stop = lp.stop_event()
    while not stop.wait(self._interval_seconds):
      if checkpointer:
        self._checkpoint(client, replay_dir)
    if checkpointer:
      self._checkpoint(client, replay_dir)
    server.stop()

  def _checkpoint(self, client: reverb.Client, replay_dir: str) -> None:
    try:
      path = client.checkpoint()
      # Reverb fsyncs none of it: its files, then the folders.
      durable.sync([*(os.path.join(path, name) for name in os.listdir(path)),
                    path, replay_dir])
    except Exception as e:
      # Reverb reports a failed write as RuntimeError or a TF error.
      kept = layout.complete_replay_checkpoints(replay_dir)
      raise CheckpointWriteError(
          f'cannot save a replay checkpoint in {replay_dir}: {_reason(e)}; '
          'the last good checkpoint is kept: '
          f'{kept[-1] if kept else "none yet"}') from e
    # Writing it freed about a third of the tables' size, which glibc would
    # otherwise keep (node/memory.py).
    released = memory.release_free_memory()
    logging.info('Saved replay checkpoint %s; returned %.0f MiB of freed '
                 'memory to the system', path, released / 2**20)
