"""The final evaluation: N episodes with the parameters the budget ends with.

Evaluations during a run play one episode at a time with Acme's loop; the
final one plays all `final_eval_episodes` episodes at once, in N
environments stepped in lockstep with one batched policy call a step (the
batched actor's way), so it takes about one episode's time and the actors,
which keep stepping until the program stops, overshoot the budget by
seconds, not minutes. The parameters are fetched once, when the budget is
reached, and not updated while the episodes play.

A recurrent agent's policy keeps state per environment, which the batched
call does not carry: its episodes are played one after another with the
agent's own actor (`play_with_actor`), made when the budget is reached.
"""

from typing import Callable, Dict, List, Optional, Sequence

from acme_launch import compat  # pylint: disable=unused-import  (JAX aliases; before acme)
import acme
from acme.jax import variable_utils
import dm_env
import jax
import numpy as np
import tree

from acme_launch.program import batched_actor


def play_episodes(environments: Sequence[dm_env.Environment],
                  policy: Callable, params, random_key,
                  policy_returns_extras: bool) -> Dict[str, List[float]]:
  """One episode in each environment; returns per-episode returns, lengths."""
  policy_step = jax.jit(policy, backend='cpu')
  timesteps = [environment.reset() for environment in environments]
  returns = np.zeros(len(environments))
  lengths = np.zeros(len(environments), np.int64)
  running = np.ones(len(environments), bool)
  while running.any():
    random_key, key = jax.random.split(random_key)
    observations = tree.map_structure(
        lambda *xs: np.stack(xs), *[t.observation for t in timesteps])
    actions, _ = batched_actor.actions_and_extras(
        policy_step(params, key, observations), policy_returns_extras)
    for i in np.flatnonzero(running):
      timesteps[i] = environments[i].step(actions[i])
      returns[i] += timesteps[i].reward
      lengths[i] += 1
      running[i] = not timesteps[i].last()
  return {'returns': returns.tolist(), 'lengths': lengths.tolist()}


def play_with_actor(environments: Sequence[dm_env.Environment],
                    actor: acme.Actor) -> Dict[str, List[float]]:
  """One episode in each environment, in turn, with an Acme actor that is
  not updated (its parameters are those it was made with)."""
  returns, lengths = [], []
  for environment in environments:
    timestep = environment.reset()
    actor.observe_first(timestep)  # Resets the actor's recurrent state.
    episode_return, length = 0.0, 0
    while not timestep.last():
      action = actor.select_action(timestep.observation)
      timestep = environment.step(action)
      actor.observe(action, timestep)
      episode_return += float(timestep.reward)
      length += 1
    returns.append(episode_return)
    lengths.append(length)
  return {'returns': returns, 'lengths': lengths}


class FinalEvaluation:
  """What the evaluator needs for the final evaluation, built lazily."""

  def __init__(self, make_environment: Callable[[int], dm_env.Environment],
               seeds: Sequence[int], policy: Callable,
               variable_client: variable_utils.VariableClient, random_key,
               policy_returns_extras: bool,
               make_actor: Optional[Callable[[], acme.Actor]] = None):
    self._make_environment = make_environment
    self._policy_returns_extras = policy_returns_extras
    self._seeds = list(seeds)
    self._policy = policy
    self._variable_client = variable_client
    self._random_key = random_key
    self._make_actor = make_actor  # Recurrent agents: play with their actor.

  @property
  def episodes(self) -> int:
    return len(self._seeds)

  def run(self) -> Dict[str, List[float]]:
    environments = [self._make_environment(seed) for seed in self._seeds]
    if self._make_actor is not None:
      # Made now, so it fetches the parameters the budget ends with.
      return play_with_actor(environments, self._make_actor())
    self._variable_client.update_and_wait()
    return play_episodes(environments, self._policy,
                         self._variable_client.params, self._random_key,
                         self._policy_returns_extras)
