"""A policy exported by `python -m acme_launch.export`, loaded with numpy
and JAX only: no Launchpad, Reverb, TensorFlow, Acme or the launcher.

    from acme_launch import policy
    act = policy.load(OUT_DIR)
    actions = act(observations)                 # feed-forward: a batch [B, ...]
    state = act.initial_state(batch_size)       # recurrent (R2D2, IMPALA)
    actions, state = act(observations, state)
    act.to_task(actions)                        # the task's own action units

The export saved the evaluation policy's own computation (StableHLO, by
`jax.export`, batch dimension free) beside its parameters (params.npz), so
nothing here rebuilds a network: the actions are the evaluator's, from the
same parameters, whatever the agent or a user's adapter. The parameters
stay plain numpy arrays in params.npz, readable without this module.
"""

import dataclasses
import json
import os
from typing import Any, Dict, List

import numpy as np

MANIFEST = 'manifest.json'
PARAMS = 'params.npz'
STATE = 'initial_state.npz'
STEP = 'policy.jax_export'


@dataclasses.dataclass(frozen=True)
class Policy:
  """A callable: observations [B, ...] -> actions [B, ...], or for a
  recurrent policy (observations, state) -> (actions, state)."""
  manifest: Dict[str, Any]
  params: List[np.ndarray]       # The parameters' leaves, in the export's order.
  state: List[np.ndarray]        # One environment's initial state's leaves.
  exported: Any                  # jax.export.Exported of the step.

  @property
  def recurrent(self) -> bool:
    return bool(self.manifest['recurrent'])

  def initial_state(self, batch_size: int = 1) -> List[np.ndarray]:
    """The state of `batch_size` environments at their episodes' start."""
    return [np.repeat(leaf[None], batch_size, axis=0) for leaf in self.state]

  def __call__(self, observations, state=None):
    observations = np.asarray(observations, np.dtype(
        self.manifest['observation']['dtype']))
    if self.recurrent:
      if state is None:
        raise ValueError('a recurrent policy takes (observations, state): '
                         'start from initial_state(batch_size)')
      actions, state = self.exported.call(self.params, observations,
                                          list(state))
      return np.asarray(actions), [np.asarray(leaf) for leaf in state]
    return np.asarray(self.exported.call(self.params, observations))


  def to_task(self, actions) -> np.ndarray:
    """The policy's actions as the task takes them: continuous ones are in
    [-1, 1] for the agent, and the environment it trained in clipped and
    rescaled them to the task's bounds (the manifest's `task_minimum` and
    `task_maximum`); others, and exports made before the manifest gave
    the bounds, as they are."""
    action = self.manifest.get('action') or {}
    if 'task_minimum' not in action:
      return np.asarray(actions)
    low = np.asarray(action['task_minimum'], np.float32)
    high = np.asarray(action['task_maximum'], np.float32)
    clipped = np.clip(np.asarray(actions, np.float32), -1.0, 1.0)
    return low + (clipped + 1.0) * 0.5 * (high - low)


def _leaves(path: str) -> List[np.ndarray]:
  with np.load(path) as arrays:
    return [arrays[f'leaf_{i}'] for i in range(len(arrays.files))]


def load(out_dir: str) -> Policy:
  """The policy exported into `out_dir`."""
  from jax import export
  with open(os.path.join(out_dir, MANIFEST)) as f:
    manifest = json.load(f)
  with open(os.path.join(out_dir, STEP), 'rb') as f:
    exported = export.deserialize(bytearray(f.read()))
  state_path = os.path.join(out_dir, STATE)
  state = _leaves(state_path) if os.path.exists(state_path) else []
  return Policy(manifest, _leaves(os.path.join(out_dir, PARAMS)), state,
                exported)
