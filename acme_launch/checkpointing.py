"""Learner and counter checkpoints at fixed paths in the run directory.

Acme's own runners add a per-process uid to the checkpoint path, so learner
and counter land in unrelated folders and nothing resumes. Here both use
Acme's TF checkpointer (tf.train.Checkpoint + CheckpointManager) with
`add_uid=False`, under <run_dir>/checkpoints/<component>/.
"""

import os
from typing import List

from absl import logging
from acme import core
from acme.tf import savers as tf_savers
from acme.utils import counting
from acme.utils import signals
import launchpad as lp
from launchpad import address as lp_address
import ml_collections
import reverb

from acme_launch import rundir


def make_checkpointer(saveable, run_dir: str, component: str,
                      checkpoint_config: ml_collections.ConfigDict
                      ) -> tf_savers.Checkpointer:
  """A TF checkpointer for `saveable` that restores the latest save, if any."""
  return tf_savers.Checkpointer(
      objects_to_save={component: saveable},
      directory=run_dir,  # Acme appends 'checkpoints/<subdirectory>'.
      subdirectory=component,
      add_uid=False,
      time_delta_minutes=checkpoint_config.interval_minutes,
      max_to_keep=checkpoint_config.max_to_keep)


class CheckpointedLearner(core.Worker, core.VariableSource):
  """Steps a learner, saving on schedule and once more when stopped."""

  def __init__(self, learner: core.Learner, run_dir: str,
               checkpoint_config: ml_collections.ConfigDict):
    self._learner = learner
    self._checkpointer = make_checkpointer(learner, run_dir, 'learner',
                                           checkpoint_config)

  def get_variables(self, names: List[str]) -> List[core.types.NestedArray]:
    return self._learner.get_variables(names)

  def run(self) -> None:
    # On stop, save from the signal thread, then end the step loop.
    with signals.runtime_terminator(lambda: self._checkpointer.save(force=True)):
      while True:
        self._learner.step()
        self._checkpointer.save()


class CheckpointedCounter(counting.Counter):
  """The central counter, saved on schedule and when the program stops."""

  def __init__(self, run_dir: str,
               checkpoint_config: ml_collections.ConfigDict):
    super().__init__()
    self._checkpointer = make_checkpointer(self, run_dir, 'counter',
                                           checkpoint_config)

  def run(self) -> None:
    stop = lp.stop_event()
    while not stop.wait(1.0):
      self._checkpointer.save()
    self._checkpointer.save(force=True)


class ReplayNode(lp.ReverbNode):
  """A Reverb node that checkpoints its tables and stops its server at the end.

  Launchpad's ReverbNode never checkpoints and leaves its server running when
  the program stops (a learner blocked on sampling then never returns). This
  one restores the newest replay checkpoint under <run_dir>/checkpoints/replay
  at start (Reverb's DefaultCheckpointer does that), saves every
  `interval_minutes` and once more on stop, then stops the server.
  """

  def __init__(self, priority_tables_fn, run_dir: str,
               checkpoint_config: ml_collections.ConfigDict):
    super().__init__(priority_tables_fn)
    self._replay_dir = (os.path.join(rundir.checkpoints_dir(run_dir), 'replay')
                        if checkpoint_config.replay else '')
    self._interval_seconds = 60.0 * checkpoint_config.interval_minutes

  def run(self) -> None:
    checkpointer = (reverb.checkpointers.DefaultCheckpointer(self._replay_dir)
                    if self._replay_dir else None)
    port = lp_address.get_port_from_address(self._address.resolve())
    server = reverb.Server(tables=self._priority_tables_fn(), port=port,
                           checkpointer=checkpointer)
    client = reverb.Client(f'localhost:{port}')
    stop = lp.stop_event()
    while not stop.wait(self._interval_seconds):
      if checkpointer:
        client.checkpoint()
    if checkpointer:
      logging.info('Saving replay checkpoint: %s', client.checkpoint())
    server.stop()
