"""A run read back for use: its config, its agent, and a learner checkpoint's
parameters as numpy arrays.

Evaluating a run, filming it and exporting its policy all start here and
need no learner, no Reverb and no Launchpad program: the learner checkpoint
(program/checkpointing.py) holds the learner's saved state, and the
parameters its actors fetch are read from that state the way its learner
serves them (`agents.saved_actor_variables`). A PPO run's observation
statistics are part of those parameters (agents/ppo/normalization.py) and
come with them.

Everything here reads; nothing in the run directory is written, locked or
moved, so a run still training can be used while its learner saves: a
checkpoint is chosen from TF's state file, read whole, and checked against
the digest its save left beside it.
"""

import dataclasses
import os
import pickle
import sys
from typing import Any, Dict, Optional

import numpy as np

from acme_launch import agents
from acme_launch import errors
from acme_launch import layout
from acme_launch.config import saved as saved_config

_PY_STATE = 'state/.ATTRIBUTES/py_state'  # Acme's SaveableAdapter's tensor.
NORMALIZER = 'observation_normalizer'     # agents/ppo/normalization.py


@dataclasses.dataclass(frozen=True)
class Run:
  """A run directory's saved config (config.json) and its agent."""
  run_dir: str
  saved: Dict[str, Any]      # config.json as written (node_seeds, ...).
  config: Any                # The experiment config (ml_collections).
  adapter: agents.Adapter


@dataclasses.dataclass(frozen=True)
class Restored:
  """The parameters of one learner checkpoint, as its actors fetch them."""
  checkpoint: str            # The checkpoint's path prefix.
  params: Any                # A tree of numpy arrays.
  # The learner's steps at the save where its state has them, else None.
  learner_steps: Optional[int]
  # PPO's running observation mean, var and count, where it normalizes.
  observation_statistics: Optional[Dict[str, np.ndarray]]


def read_run(run_dir: str, config=None) -> Run:
  """RUN_DIR's saved config and agent (its own code found as the launcher
  finds it: the saved python_path first). `config`: the config to use
  instead (the saved one with overrides applied). LaunchError: not a run."""
  saved = saved_config.read(run_dir)
  if saved is None:
    raise errors.LaunchError(
        f'{run_dir} is not a run directory (no config.json in it)')
  for path in reversed(saved.get('python_path', [])):
    if path not in sys.path:
      sys.path.insert(0, path)
  config = saved_config.config_of(saved) if config is None else config
  return Run(run_dir, saved, config, agents.load(config.agent))


def checkpoint_prefix(run_dir: str, checkpoint: str = '') -> str:
  """The learner checkpoint to use: the newest in RUN_DIR's state file, or
  `checkpoint` (a name there, like ckpt-3, or a path prefix)."""
  import tensorflow as tf
  directory = layout.component_dir(run_dir, 'learner')
  if checkpoint:
    prefix = (checkpoint if os.sep in checkpoint
              else os.path.join(directory, checkpoint))
    if not tf.io.gfile.glob(prefix + '.index'):
      raise errors.LaunchError(
          f'no learner checkpoint {prefix} (its .index file is missing)')
    return prefix
  try:
    state = tf.train.get_checkpoint_state(directory)
  except (tf.errors.OpError, ValueError) as e:
    raise errors.LaunchError(
        f'the learner checkpoint state file in {directory} is unreadable: '
        f'{" ".join(str(e).split())[:200]}') from None
  if state is None or not state.model_checkpoint_path:
    raise errors.LaunchError(
        f'{run_dir} has no learner checkpoint yet ({directory} holds none: '
        'the learner saves every checkpoint.interval_minutes and when the '
        'run stops)')
  return os.path.join(directory, os.path.basename(state.model_checkpoint_path))


def read_state(prefix: str):
  """The learner state saved at `prefix`, read whole and checked against
  its digest where the save left one. LaunchError if it does not read."""
  import tensorflow as tf
  from acme_launch.program import checkpointing
  try:
    reader = tf.train.load_checkpoint(prefix)
    # Every tensor read, as a resume does (run/resume.py): a shard cut
    # short raises here even when the state's own shard is whole.
    tensors = {name: reader.get_tensor(name)
               for name in reader.get_variable_to_shape_map()}
    state = pickle.loads(tensors[_PY_STATE])
  except Exception as e:  # TF's reader raises many types for damage.
    raise errors.LaunchError(
        f'learner checkpoint {prefix} does not read (cut short or not a '
        f'learner checkpoint): {type(e).__name__}: '
        f'{" ".join(str(e).split())[:200]}') from None
  digest = _read_text(prefix + '.digest')
  if digest and digest.strip() != checkpointing.state_digest(state):
    raise errors.LaunchError(
        f'learner checkpoint {prefix} does not match the digest its save '
        f'wrote ({prefix}.digest): its files were changed or cut short')
  return state


def _read_text(path: str) -> str:
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return ''


def restore(run: Run, checkpoint: str = '') -> Restored:
  """The parameters its actors would fetch from the learner checkpoint
  (the newest, or `checkpoint`), as numpy arrays."""
  import jax
  prefix = checkpoint_prefix(run.run_dir, checkpoint)
  state = read_state(prefix)
  try:
    params = agents.saved_actor_variables(run.adapter, state)
  except (AttributeError, KeyError, TypeError) as e:
    raise errors.LaunchError(
        f'learner checkpoint {prefix} is not one of config.agent '
        f'{run.config.agent}: its state ({type(state).__module__}.'
        f'{type(state).__name__}) has no parameters its actors fetch '
        f'({type(e).__name__}: {e})') from None
  params = jax.tree_util.tree_map(np.asarray, params)
  stats = None
  if isinstance(params, dict) and NORMALIZER in params:
    stats = {k: np.asarray(v) for k, v in params[NORMALIZER].items()}
  steps = getattr(state, 'steps', None)
  return Restored(prefix, params,
                  None if steps is None else int(np.asarray(steps)), stats)


class ParamsSource:
  """A variable source (Acme's `core.VariableSource`) serving restored
  parameters under any name: what a builder's actor or a variable client
  fetches from in place of the learner."""

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


def check_fits(policy, params, builder, prefix: str) -> None:
  """LaunchError unless `policy` (an agents.evaluation_policy value) acts
  with `params` on an observation of its environment spec: a checkpoint of
  another agent or network size, or a task whose observations differ, is
  one line here rather than a trace mid-episode."""
  import dm_env
  import jax
  import tree
  observation = tree.map_structure(
      lambda spec: spec.generate_value(),
      policy.environment_spec.observations)
  key = jax.random.PRNGKey(0)
  try:
    if policy.recurrent:
      actor = policy.make_actor(builder, key, ParamsSource(params))
      actor.observe_first(dm_env.restart(observation))
      actor.select_action(observation)
    else:
      batch = tree.map_structure(lambda x: np.asarray(x)[None], observation)
      policy.batched_actions()(params, key, batch)
  except Exception as e:
    raise errors.LaunchError(
        f'learner checkpoint {prefix} does not fit config.agent '
        f'{policy.config.agent} on {policy.config.env_name} (another agent, '
        f'network size or observation shape): {type(e).__name__}: '
        f'{" ".join(str(e).split())[:200]}') from None
