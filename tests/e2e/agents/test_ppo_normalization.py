"""PPO observation normalization in a real run: statistics learned, saved with
the learner's checkpoint and continued after --resume (the statistics' maths
in process: tests/agents/test_ppo_normalization.py)."""

import glob
import os
import pickle

from acme_launch import compat  # JAX aliases; before acme
import numpy as np

from acme_launch.agents.ppo import normalization as ppo_adapter
from tests.conftest import read_json, run_launcher


def _normalizer_of_newest_learner_checkpoint(run_dir):
  import tensorflow as tf
  newest = sorted(glob.glob(os.path.join(
      run_dir, 'checkpoints', 'learner', 'ckpt-*.index')))[-1][:-len('.index')]
  state = pickle.loads(tf.train.load_checkpoint(newest).get_tensor(
      'state/.ATTRIBUTES/py_state'))
  return {k: np.asarray(v) for k, v in state.params[ppo_adapter.NORMALIZER].items()}


def test_statistics_are_learned_saved_and_continue_after_resume(workdir):
  run_dir = os.path.join(workdir, 'norm')
  args = ('--config=smoke', '--config.network.normalize_observations=True',
          f'--workdir={workdir}', '--run_name=norm')
  first = run_launcher(*args, '--config.max_actor_steps=1500')
  assert first.returncode == 0, first.stderr[-2000:]
  saved = _normalizer_of_newest_learner_checkpoint(run_dir)
  newest = sorted(glob.glob(os.path.join(run_dir, 'checkpoints', 'learner',
                                         'ckpt-*.digest')))[-1]
  with open(newest) as f:
    saved_digest = f.read()
  # Each learner step merges batch_size (8) sequences of unroll_length + 1
  # (9) observations: counted exactly, never moved by the optimizer.
  assert saved['count'] > 0 and saved['count'] % 72 == 0
  assert np.all(saved['var'] > 0) and np.any(np.abs(saved['mean']) > 1e-3)

  second = run_launcher(*args, '--config.max_actor_steps=3000')
  assert second.returncode == 0, second.stderr[-2000:]
  assert 'resuming from' in second.stdout
  # The whole learner state, statistics included, came back exactly.
  restore = read_json(os.path.join(run_dir, 'nodes', 'learner_restore.json'))
  assert restore['digest'] == saved_digest
  resumed = _normalizer_of_newest_learner_checkpoint(run_dir)
  assert resumed['count'] > saved['count'] and resumed['count'] % 72 == 0
  assert read_json(os.path.join(run_dir, 'summary.json'))['final_eval_episodes'] == 10
