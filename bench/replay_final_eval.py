"""Replays a finished run's final evaluation through other evaluation paths.

    .venv/bin/python bench/replay_final_eval.py RUN_DIR [--extra=20] \
        [--paths=batched,loop,batched_sample,loop_sample,gym,gym_sample]

A final evaluation whose episodes split into runs and standstills could
come from the policy or from how the evaluator plays it (its seeds, resets,
observation statistics, the parameters it fetched, its batched policy
calls). This loads the learner's last checkpoint from RUN_DIR (saved when
the program stopped: with the learning rate annealed to 0 it holds the
parameters the final evaluation fetched; `batched` replays final_eval.json
episode for episode when it does) and plays the final evaluation's seeds
(plus `--extra` more) through each path, printing every episode's return:

  batched         the final evaluation's own path (program/evaluation.py)
  loop            Acme's actor and EnvironmentLoop, one environment at a time
  *_sample        the same with the sampling (training) policy
  gym, gym_*      the gym backend instead of the run's EnvPool (other start
                  states for the same seeds: compare the counts)

An episode is counted still when its return is under `--still` (1,000).
A PPO run (an agent whose policy returns extras) only.

`--poses` (HalfCheetah only): instead, plays the same seeds one environment
at a time with the deterministic policy. For each episode that turns onto
its back (pitch past 2 rad): the step, and its mean forward velocity from
then on. For each whose forward velocity stays under 0.3 for 50 steps,
where it stopped: the step, the torso's height and pitch (rootz, rooty:
about pi on its back, past 2 pi after a whole flip), the front thigh's
angle (its joint limit is 0.7 rad), the policy's action there, and the
sampling policy's standard deviation there and, for comparison, its mean
over the episode's first 200 steps.
"""

import argparse
import os
import pickle
import sys
from typing import Optional

from acme_launch import compat  # JAX aliases; before acme
import acme
from acme import core
from acme import specs
from acme.jax import variable_utils
from acme.utils import loggers
import jax
import ml_collections
import numpy as np
import tensorflow as tf

from acme_launch import agents
from acme_launch import envs as environments
from acme_launch import layout
from acme_launch.program import evaluation


class _Params(core.VariableSource):

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


def saved_params(run_dir: str):
  """The learner's parameters in its newest checkpoint."""
  path = tf.train.latest_checkpoint(os.path.join(run_dir, 'checkpoints',
                                                 'learner'))
  if path is None:
    sys.exit(f'bench/replay_final_eval.py: no learner checkpoint in {run_dir}')
  state = pickle.loads(tf.train.load_checkpoint(path).get_tensor(
      'state/.ATTRIBUTES/py_state'))
  return jax.tree_util.tree_map(np.asarray, state.params)


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('run_dir')
  parser.add_argument('--paths', default='batched,loop,batched_sample,'
                      'loop_sample,gym,gym_sample')
  parser.add_argument('--extra', type=int, default=0,
                      help='episodes from seeds 1000, 1001, ... as well')
  parser.add_argument('--still', type=float, default=1000.0)
  parser.add_argument('--poses', action='store_true',
                      help='where still episodes stopped (HalfCheetah)')
  args = parser.parse_args(argv)
  saved = layout.read_json(os.path.join(args.run_dir, 'config.json'))
  final = layout.read_json(layout.final_eval_path(args.run_dir))
  if not saved or not final:
    sys.exit(f'bench/replay_final_eval.py: {args.run_dir} has no config.json '
             'or final_eval.json')
  config = ml_collections.ConfigDict(saved['config'])
  adapter = agents.load(config.agent)
  params = saved_params(args.run_dir)
  spec = specs.make_environment_spec(environments.make_environment(
      config.env_name, 0, backend=config.env_backend))
  networks = adapter.make_networks(config, spec)
  builder = adapter.make_builder(config, loggers.NoOpLogger, spec)
  # The evaluator's seeds, as program/build.py derives them (a run made
  # before config.json recorded 'final_eval_seeds' drew unrelated ones).
  seed = saved['node_seeds']['evaluator/0']
  if saved.get('final_eval_seeds') == 'consecutive':
    seeds = environments.consecutive_seeds(seed, 'final_eval',
                                           final['episodes'])
  else:
    seeds = [environments.node_seed(seed, 'final_eval', j)
             for j in range(final['episodes'])]
  seeds += list(range(1000, 1000 + args.extra))
  key = jax.random.PRNGKey(environments.node_seed(seed, 'final_eval_key', 0))

  def show(name, returns):
    returns = np.asarray(returns, float)
    print(f'{name:<15} still {int((returns < args.still).sum()):>2}/'
          f'{returns.size}  {np.round(returns).astype(int).tolist()}',
          flush=True)

  if args.poses:
    return poses(config, adapter, networks, spec, params, seeds, key)
  show('recorded', final['returns'])
  for path in args.paths.split(','):
    backend = 'gym' if path.startswith('gym') else config.env_backend
    policy = adapter.make_policy(config, networks, spec,
                                 evaluation=not path.endswith('sample'))
    make = lambda s, b=backend: environments.make_environment(
        config.env_name, s, backend=b, evaluation=True)
    if path.startswith('loop'):
      returns = []
      for j, s in enumerate(seeds):  # A key per episode: its own noise.
        actor = builder.make_actor(jax.random.fold_in(key, j), policy,
                                   variable_source=_Params(params))
        loop = acme.EnvironmentLoop(
            make(s), actor,
            logger=loggers.NoOpLogger(), should_update=False)
        returns.append(float(loop.run_episode()['episode_return']))
    else:
      returns = evaluation.Evaluation(
          make, seeds, policy, variable_utils.VariableClient(
              _Params(params), adapter.actor_variables),
          key, adapter.policy_returns_extras).run()['returns']
    show(path, returns)
  return 0


# HalfCheetah's observation: qpos[1:] (rootz, rooty, bthigh, bshin, bfoot,
# fthigh, fshin, ffoot), then qvel (rootx's first).
_ROOTZ, _ROOTY, _FTHIGH, _VELOCITY = 0, 1, 5, 8
_SLOW, _SLOW_STEPS = 0.3, 50
_ON_ITS_BACK = 2.0   # |pitch| in rad


def _row(values) -> str:
  return '[' + ' '.join(f'{v:.2f}' for v in np.asarray(values)) + ']'


def _first_run_end(flags: np.ndarray, length: int) -> Optional[int]:
  """The first index that ends `length` True flags in a row, or None."""
  run = 0
  for i, flag in enumerate(flags):
    run = run + 1 if flag else 0
    if run == length:
      return i
  return None


def poses(config, adapter, networks, spec, params, seeds, key) -> int:
  """Where each still episode stopped; see the module's docstring."""
  policy = jax.jit(adapter.make_policy(config, networks, spec, evaluation=True))
  std = jax.jit(lambda o: networks.network.apply(params, o)[0].stddev())
  for s in seeds:
    env = environments.make_environment(config.env_name, s,
                                        backend=config.env_backend,
                                        evaluation=True)
    timestep, total, observations, actions = env.reset(), 0.0, [], []
    while not timestep.last():
      observation = np.asarray(timestep.observation, np.float32)
      action = np.asarray(policy(params, key, observation[None])[0])[0]
      observations.append(observation)
      actions.append(action)
      timestep = env.step(action)
      total += timestep.reward
    o = np.asarray(observations)
    line = f'seed {s:>5}  return {total:>7.0f}'
    on_back = np.flatnonzero(np.abs(o[:, _ROOTY]) > _ON_ITS_BACK)
    if on_back.size:
      flipped = on_back[0]
      line += (f'  on its back from step {flipped}, then '
               f'{o[flipped:, _VELOCITY].mean():.1f} m/s')
    end = _first_run_end(o[:, _VELOCITY] < _SLOW, _SLOW_STEPS)
    if end is not None:
      line += (f'  still from step {end - _SLOW_STEPS + 1}: rootz '
               f'{o[end, _ROOTZ]:.2f} rooty {o[end, _ROOTY]:.2f} fthigh '
               f'{o[end, _FTHIGH]:.2f}; action {_row(actions[end])}; std '
               f'{_row(std(o[end:end + 1])[0])}; first 200 steps std '
               f'{_row(np.asarray(std(o[:200])).mean(0))}')
    print(line, flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
