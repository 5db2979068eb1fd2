"""acme_launch.use.evaluate for every shipped agent and a user's adapter
(examples/), in this process: each agent's real learner saved by the run's
own checkpointer (program/checkpointing.py) into a run directory with its
config.json, then two episodes played from that checkpoint, recurrent
agents (R2D2, IMPALA) with their builder's actor. The real run's
evaluation (its final evaluation replayed, the command line, bad input):
tests/e2e/test_evaluate.py.
"""

import os

import pytest

from acme_launch import layout
from acme_launch.testing import checkpointed
from acme_launch.use import evaluate
from tests.use.test_restore import CONFIGS, EXAMPLES

EPISODE_STEPS = 20


def _run_dir(tmp_path, config_name, overrides=None):
  """A run directory holding the config's learner checkpoint, as a run's
  learner saves it (`overrides`: as make_learner's)."""
  config = checkpointed.load_config(config_name, overrides)
  config.env_max_episode_steps = EPISODE_STEPS
  return checkpointed.make_run_dir(str(tmp_path / 'run'), config, [EXAMPLES])


# The sampling policy too where it is made differently: PPO's returns its
# log-probs, DQN's takes the actor's index, R2D2's keeps state.
CASES = ([(name, False) for name in CONFIGS] +
         [(name, True) for name in ('smoke', 'dqn_cartpole', 'r2d2_minatar')])


@pytest.mark.parametrize('config_name, sample', CASES,
                         ids=lambda v: (os.path.basename(v) if isinstance(v, str)
                                        else 'sample' if v else 'eval'))
def test_every_agent_plays_its_checkpoint(tmp_path, monkeypatch, config_name,
                                          sample):
  monkeypatch.syspath_prepend(EXAMPLES)
  run_dir = _run_dir(tmp_path, config_name)
  lines = []
  result = evaluate.evaluate(evaluate.Request(run_dir, episodes=2,
                                              sample=sample), lines.append)
  assert len(result['returns']) == 2
  assert all(0 < n <= EPISODE_STEPS for n in result['lengths'])
  assert sum(l.startswith('episode ') for l in lines) == 2
  assert os.path.isfile(result['path'])
  assert os.path.dirname(result['path']) == layout.evaluations_dir(run_dir)
