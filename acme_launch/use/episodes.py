"""A feed-forward agent's episodes on EnvPool, in as few pools as the seeds
allow, all stepped at once.

The evaluator plays its episodes in lockstep, one batched policy call a
step (program/evaluation.py `play_episodes`), each in a one-environment
EnvPool made with the episode's seed. Held that way, 100 `ppo_mujoco`
episodes cost an EnvPool call (and its thread's wake-up) per environment
per step: 5.3x the time one pool of 100 takes for the same steps
(docs/benchmarks.md).

EnvPool 0.8.4 seeds a pool's environment i with the pool's seed + i and
takes no seed per environment, nor a state to start from: one pool can play
only consecutive seeds. So the seeds are cut into runs of consecutive
values, one pool each. The final evaluation's seeds and `--seed`'s are
consecutive (envs.consecutive_seeds; use/evaluate.py): one pool. A run
made before the final evaluation drew them so has unrelated ones
(envs.node_seed): replaying them takes a pool per episode, their start
states the final evaluation's only that way.

Every pool is sent its step before any is received, so the pools step in
their own threads while the rest are sent and while the Python-side
environments (filmed episodes, envs/video.py) step. A pool keeps stepping
its ended environments (EnvPool's sync mode steps all of a pool; an ended
one restarts and its new episode is ignored) until its last episode ends.
Otherwise each step is the evaluator's: the same key split, the same batch
(an ended episode's row keeps its last observation), the same float32
rewards summed, so the returns are the evaluator's for the same seeds.
"""

import functools
from typing import Callable, Dict, List, Sequence, Tuple

from acme_launch import compat  # noqa: F401  JAX aliases; before acme
import dm_env
import jax
import numpy as np

from acme_launch.envs.batched import LAST
from acme_launch.program import batched_actor


def consecutive_runs(seeds: Sequence[int]) -> List[Tuple[int, int]]:
  """(first index, length) of each run of consecutive seeds, in order:
  [7, 8, 9, 3] -> [(0, 3), (3, 1)]."""
  runs = []
  for index, seed in enumerate(seeds):
    if runs and seeds[index - 1] + 1 == seed:
      runs[-1] = (runs[-1][0], runs[-1][1] + 1)
    else:
      runs.append((index, 1))
  return runs


def play_episodes(pools: Sequence[Tuple[object, np.ndarray]],
                  environments: Sequence[Tuple[dm_env.Environment, int]],
                  policy: Callable, params, random_key,
                  policy_returns_extras: bool) -> Dict[str, List[float]]:
  """One episode in each row: `pools` are (envs.EnvPoolEnvironments in
  sync mode, the rows of its environments 0..n-1), `environments`
  (dm_env.Environment, its row); every row is in one of them.
  `policy(params, key, observations)` acts for all rows."""

  @functools.partial(jax.jit, backend='cpu')
  def policy_step(params, random_key, observations):
    # The evaluator's key split, in the same call: a step's key costs no
    # dispatch of its own (one took as long as the policy here).
    random_key, key = jax.random.split(random_key)
    return random_key, policy(params, key, observations)

  count = sum(len(rows) for _, rows in pools) + len(environments)
  returns = np.zeros(count)
  lengths = np.zeros(count, np.int64)
  running = np.ones(count, bool)
  observations = None

  def put(rows, values):
    nonlocal observations
    values = np.asarray(values)
    if observations is None:
      observations = np.zeros((count,) + values.shape[1:], values.dtype)
    observations[rows] = values

  for pool, rows in pools:
    first = pool.reset()
    put(rows[first.env_id], first.observation)
  for environment, row in environments:
    put([row], [environment.reset().observation])
  env_ids = [np.arange(len(rows), dtype=np.int32) for _, rows in pools]
  while running.any():
    random_key, output = policy_step(params, random_key, observations)
    actions, _ = batched_actor.actions_and_extras(output,
                                                  policy_returns_extras)
    live = [(pool, rows, ids) for (pool, rows), ids in zip(pools, env_ids)
            if running[rows].any()]
    for pool, rows, ids in live:  # Their threads step while we go on.
      pool.send(actions[rows], ids)
    for environment, row in environments:
      if running[row]:
        timestep = environment.step(actions[row])
        returns[row] += timestep.reward
        lengths[row] += 1
        running[row] = not timestep.last()
        put([row], [timestep.observation])
    for pool, rows, _ in live:
      batch = pool.recv()
      batch_rows = rows[batch.env_id]
      playing = running[batch_rows]
      batch_rows = batch_rows[playing]
      returns[batch_rows] += batch.reward[playing]
      lengths[batch_rows] += 1
      running[batch_rows] = batch.step_type[playing] != LAST
      put(batch_rows, batch.observation[playing])
  return {'returns': returns.tolist(), 'lengths': lengths.tolist()}
