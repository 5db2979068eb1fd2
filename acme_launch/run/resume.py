"""Before a run resumes: what its run directory's checkpoints hold.

The launcher half of checkpointing (program/checkpointing.py is the node
half): before any process starts, `verify_for_resume` reads every checkpoint
a run may restore, whole, and points a component whose newest save is
unreadable back at its previous one, so that a node never dies at start on a
checkpoint a crash left half written.
"""

import dataclasses
import os
import pickle
from typing import Any, Dict, List

import tensorflow as tf

from acme_launch import errors
from acme_launch import layout


@dataclasses.dataclass(frozen=True)
class ResumeState:
  """What a run directory's checkpoints hold, checked before launch."""
  counts: Dict[str, float]          # The counter's totals (empty if fresh).
  checkpoints: Dict[str, str]       # Component -> checkpoint to restore.
  warnings: List[str]               # Fallbacks made, one line each.


def _read_whole_checkpoint(prefix: str) -> Dict[str, Any]:
  """Reads every tensor of a TF checkpoint: raises if any part is corrupt."""
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def _counter_counts(tensors: Dict[str, Any]) -> Dict[str, float]:
  for name, value in tensors.items():
    if name.endswith('py_state'):
      return dict(pickle.loads(value)['counts'])
  raise ValueError('no counter state in checkpoint')


def verify_for_resume(run_dir: str) -> ResumeState:
  """Checks every checkpoint a resume would restore; raises LaunchError.

  Learner and counter (TF checkpointer) go through `_verify_tf_component`,
  the replay tables (Reverb) through `_verify_replay`; each returns the save
  it chose and a warning when that is not the newest one.
  """
  counts: Dict[str, float] = {}
  chosen: Dict[str, str] = {}
  warnings: List[str] = []
  for component in layout.COMPONENTS:
    prefix, tensors, warning = _verify_tf_component(
        layout.component_dir(run_dir, component), component)
    if prefix is None:
      continue
    chosen[component] = prefix
    if component == 'counter':
      counts = _counter_counts(tensors)
    if warning:
      warnings.append(warning)
  folder, warning = _verify_replay(layout.component_dir(run_dir, 'replay'))
  if folder:
    chosen['replay'] = folder
  if warning:
    warnings.extend(warning)
  return ResumeState(counts, chosen, warnings)


def _verify_tf_component(directory: str, component: str):
  """(prefix, its tensors, warning or '') of the newest save that reads
  completely; (None, None, '') when there is none to resume.

  If that is not the newest save, the state file is pointed at it (the
  unreadable files stay on disk) and the warning says so; if none reads,
  LaunchError names the directory.
  """
  try:
    state = tf.train.get_checkpoint_state(directory)
  except (tf.errors.OpError, ValueError) as e:
    raise errors.LaunchError(
        f'checkpoint state file {os.path.join(directory, "checkpoint")} is '
        f'unreadable: {" ".join(str(e).split())[:200]}') from e
  if state is None:
    return None, None, ''
  candidates = [os.path.join(directory, os.path.basename(p))
                for p in state.all_model_checkpoint_paths]
  problems = []
  for prefix in reversed(candidates):
    try:
      tensors = _read_whole_checkpoint(prefix)
    except Exception as e:
      # TF's reader raises OpError, IndexError, ValueError... for damage.
      problems.append(f'{prefix}: {" ".join(str(e).split())[:160]}')
      continue
    if not problems:
      return prefix, tensors, ''
    tf.compat.v1.train.update_checkpoint_state(
        directory, os.path.basename(prefix),
        all_model_checkpoint_paths=[os.path.basename(p) for p in candidates])
    return prefix, tensors, (
        f'{component} checkpoint unreadable, resuming from '
        f'{os.path.basename(prefix)} instead: {problems[0]}')
  raise errors.LaunchError(
      f'no readable {component} checkpoint in {directory} '
      f'({problems[0] if problems else "no checkpoint files"})')


_REVERB_DONE_FILE = 'DONE'  # Reverb's mark of a complete save (layout.py).


def _verify_replay(replay_dir: str):
  """(newest complete replay folder whose files read, or '', warnings).

  Folders without Reverb's DONE marker are ignored by Reverb itself (its
  load-latest takes the newest folder that has one). A complete one whose
  files do not read loses its DONE marker first, so that neither Reverb nor
  a later resume can ever load it, then is renamed `*.corrupt` and kept for
  a look. (Reverb keeps one save, so there is rarely an older one to fall
  back to: the replay then starts empty, with the warning.)
  """
  warnings = []
  for folder in reversed(layout.complete_replay_checkpoints(replay_dir)):
    try:
      for name in os.listdir(folder):
        if name.endswith('.tfrecord'):
          for _ in tf.data.TFRecordDataset(os.path.join(folder, name)):
            pass
    except tf.errors.OpError as e:
      os.remove(os.path.join(folder, _REVERB_DONE_FILE))
      os.rename(folder, folder + '.corrupt')
      warnings.append(f'replay checkpoint {folder} unreadable, moved to '
                      f'{folder}.corrupt: {" ".join(str(e).split())[:160]}')
      continue
    return folder, warnings
  return '', warnings
