"""A learner checkpoint's parameters, read without a learner: every shipped
agent and a user's adapter (examples/), against the learner itself.

In this process, each agent's real learner made by its builder (no Reverb:
nothing is sampled until it steps), its saved state given a different
value in every field, restored, and what it serves its actors compared
with `agents.saved_actor_variables` of the same state: D4PG's learner
serves its target networks, SAC's and TD3's their policy, the rest their
`params`.
"""

import os

import jax
import numpy as np
import pytest

from acme_launch import compat  # JAX aliases; before acme

from acme_launch import agents
from acme_launch.testing import checkpointed
from tests.conftest import REPO_ROOT

EXAMPLES = os.path.join(REPO_ROOT, 'examples')
CONFIGS = ('smoke', 'sac_mujoco', 'td3_mujoco', 'd4pg_mujoco', 'dqn_cartpole',
           'r2d2_minatar', 'impala_minatar',
           os.path.join(EXAMPLES, 'dueling_dqn_corridor.py'))


def _distinct(state):
  """`state` with every float array of its i-th field moved by i + 1."""
  fields = {name: jax.tree_util.tree_map(
      lambda x, i=i: (np.asarray(x) + i + 1
                      if np.issubdtype(np.asarray(x).dtype, np.floating)
                      else x), value)
            for i, (name, value) in enumerate(state._asdict().items())}
  return state._replace(**fields)


def make_learner(config_name: str, overrides=None):
  """(config, adapter, environment spec, learner) of a config, with
  `overrides` ({'network.lstm_size': 8}) applied: the agent's real
  learner, made by its builder (acme_launch/testing/checkpointed.py)."""
  config = checkpointed.load_config(config_name, overrides)
  return (config, *checkpointed.make_learner(config))


@pytest.mark.parametrize('config_name', CONFIGS,
                         ids=lambda name: os.path.basename(name))
def test_saved_state_gives_what_the_learner_serves_its_actors(
    config_name, monkeypatch):
  monkeypatch.syspath_prepend(EXAMPLES)
  _, adapter, _, learner = make_learner(config_name)
  state = _distinct(learner.save())
  learner.restore(state)
  served = learner.get_variables([adapter.actor_variables])[0]
  saved = agents.saved_actor_variables(adapter, learner.save())
  assert jax.tree_util.tree_structure(served) == (
      jax.tree_util.tree_structure(saved))
  for a, b in zip(jax.tree_util.tree_leaves(served),
                  jax.tree_util.tree_leaves(saved)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
