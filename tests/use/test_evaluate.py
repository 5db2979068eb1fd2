"""acme_launch.use.evaluate for every shipped agent and a user's adapter
(examples/), in this process: each agent's real learner saved by the run's
own checkpointer (program/checkpointing.py) into a run directory with its
config.json, then two episodes played from that checkpoint, recurrent
agents (R2D2, IMPALA) with their builder's actor. The real run's
evaluation (its final evaluation replayed, the command line, bad input):
tests/e2e/test_evaluate.py.
"""

import os

import numpy as np
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


@pytest.fixture(scope='module')
def run_dirs(tmp_path_factory):
  """run_dirs(config_name): its run directory, made once for this module
  (each evaluation writes a new file of its own in it)."""
  made = {}

  def get(config_name):
    if config_name not in made:
      made[config_name] = _run_dir(tmp_path_factory.mktemp('agent'),
                                   config_name)
    return made[config_name]

  return get


@pytest.mark.parametrize('config_name, sample', CASES,
                         ids=lambda v: (os.path.basename(v) if isinstance(v, str)
                                        else 'sample' if v else 'eval'))
def test_every_agent_plays_its_checkpoint(run_dirs, monkeypatch, config_name,
                                          sample):
  monkeypatch.syspath_prepend(EXAMPLES)
  run_dir = run_dirs(config_name)
  lines = []
  result = evaluate.evaluate(evaluate.Request(run_dir, episodes=2,
                                              sample=sample), lines.append)
  assert len(result['returns']) == 2
  assert all(0 < n <= EPISODE_STEPS for n in result['lengths'])
  assert sum(l.startswith('episode ') for l in lines) == 2
  assert os.path.isfile(result['path'])
  assert os.path.dirname(result['path']) == layout.evaluations_dir(run_dir)


@pytest.fixture(scope='module')
def pendulum_on_envpool(tmp_path_factory):
  """A smoke (PPO) run on EnvPool's InvertedPendulum-v4: its episodes end at
  different steps (the untrained policy lets the pole fall). Made before
  the final evaluation drew consecutive seeds: its seeds are unrelated,
  so pools of one and of more step together."""
  config = checkpointed.load_config(
      'smoke', {'env_name': 'InvertedPendulum-v4', 'env_backend': 'envpool',
                'env_max_episode_steps': 100, 'final_eval_episodes': 4})
  return checkpointed.make_run_dir(
      str(tmp_path_factory.mktemp('pendulum') / 'run'), config,
      final_eval_seeds=None)


@pytest.mark.parametrize('seed, sample', [(None, False), (3, True)],
                         ids=['final-eval-seeds', 'seed-sample'])
def test_envpool_pools_play_the_evaluators_episodes(pendulum_on_envpool, seed,
                                                    sample):
  """A feed-forward agent on EnvPool plays in one pool per run of
  consecutive seeds (use/episodes.py), all stepped at once: the returns
  and lengths of the evaluator's own loop, an environment per episode
  (program/evaluation.py), with or without environments of their own
  for the first episodes (--video). The final evaluation's 4 seeds (a run
  made before they were consecutive) take a pool each, the 2 episodes
  beyond them one pool; --seed's 6 one pool."""
  from acme_launch.use import episodes
  prepared = evaluate.prepare(evaluate.Request(
      pendulum_on_envpool, episodes=6, seed=seed, sample=sample))
  runs = episodes.consecutive_runs(prepared.seeds)
  assert runs == ([(0, 1), (1, 1), (2, 1), (3, 1), (4, 2)] if seed is None
                  else [(0, 6)])
  pooled = evaluate.play(prepared)
  assert pooled == evaluate.play_as_evaluator(prepared)
  assert len(set(pooled['lengths'])) > 1, pooled  # Ended apart.
  # With --video the first episodes have environments of their own
  # (filmed ones), stepped while the pools step: here EnvPool's.
  make = evaluate._environment_maker(prepared.run.config)
  assert evaluate.play(prepared, lambda s, j: make(seed=s, evaluation=True),
                       filmed=2) == pooled


def test_consecutive_runs():
  from acme_launch.use import episodes
  assert episodes.consecutive_runs([7, 8, 9, 3, 5, 6]) == [(0, 3), (3, 1),
                                                            (4, 2)]
  assert episodes.consecutive_runs([]) == []


@pytest.mark.parametrize('scheme', [None, 'consecutive'],
                         ids=['made-before', 'consecutive'])
def test_the_final_evaluations_seeds_are_those_the_run_drew(tmp_path, scheme):
  """A run whose config.json records 'final_eval_seeds': 'consecutive' (the
  driver writes it) drew its final evaluation's seeds consecutive from one
  value (program/build.py): evaluate replays them and continues them, one
  pool. One made before the record drew unrelated values: evaluate replays
  those, then consecutive seeds of their own for the episodes beyond."""
  import jax
  from acme_launch import envs as environments
  from acme_launch.program import build
  from acme_launch.use import episodes
  from acme_launch.use import restore
  config = checkpointed.load_config('smoke', {'final_eval_episodes': 4})
  saved = {'config_name': 'smoke', 'config': config.to_dict(),
           'node_seeds': {'evaluator/0': 17}}
  if scheme:
    saved['final_eval_seeds'] = scheme
  layout.write_json_atomic(layout.config_path(str(tmp_path)), saved)
  run = restore.read_run(str(tmp_path))
  seeds, key = evaluate.seeds_and_key(run, evaluate.Request(str(tmp_path)), 6)
  if scheme:
    assert scheme == build.FINAL_EVAL_SEEDS
    first = environments.node_seed(17, 'final_eval', 0) % (2**31 - 4)
    assert seeds[:4] == environments.consecutive_seeds(17, 'final_eval', 4)
    assert seeds == list(range(first, first + 6))
    assert episodes.consecutive_runs(seeds) == [(0, 6)]
  else:
    assert seeds[:4] == [environments.node_seed(17, 'final_eval', j)
                         for j in range(4)]
    assert seeds[4:] == environments.consecutive_seeds(17, 'final_eval_more',
                                                       2)
    assert len(episodes.consecutive_runs(seeds)) == 5
  assert (np.asarray(key) == np.asarray(jax.random.PRNGKey(
      environments.node_seed(17, 'final_eval_key', 0)))).all()
