"""Evaluation episodes: N at once, one batched policy call a step.

Both the evaluations during a run (`eval_episodes` every `eval_every_steps`
actor steps) and the final one at the budget (`final_eval_episodes`) play
their episodes at once, in N environments stepped in lockstep with one
batched policy call a step (the batched actor's way). In a `ppo_mujoco`
run (five episodes every 50k actor steps; a 2-core x86-64 VM, 2026-11-26;
the evaluator process's CPU time over 20 s mid-run, two runs each), played
one after another with Acme's loop and one policy call per env step they
took 0.29-0.32 of a core; in lockstep, 0.19-0.22: the rest is each
environment's own step. The final evaluation ends the run seconds, not
minutes, after the actors reach the budget. The parameters are fetched
once per evaluation and not updated while its episodes play.

A recurrent agent's policy keeps state per environment, which the batched
call does not carry: its episodes are played one after another with the
agent's own actor (`ActorEvaluation` during the run, `play_with_actor` at
the budget).

With `config.eval_video_every`, the first environment is a camera
(envs/video.py `Camera`, made by `make_first`): `run(film_to=PATH)` films
its next episode there and returns the clip under 'clip'. Filming only
reads the simulator, so the episodes and their returns are those played
without it.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence

from acme_launch import compat  # JAX aliases; before acme
import acme
from acme.jax import variable_utils
from acme.utils import loggers
import dm_env
import jax
import numpy as np
import tree

from acme_launch.program import batched_actor


def play_episodes(environments: Sequence[dm_env.Environment],
                  policy_step: Callable, params, random_key,
                  policy_returns_extras: bool) -> Dict[str, List[float]]:
  """One episode in each environment; returns per-episode returns, lengths.

  `policy_step(params, key, observations)` acts for all of them (jitted
  by the caller, once)."""
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
  not updated while they play."""
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


class Evaluation:
  """One episode in each of `seeds`' environments, each time it runs.

  The environments are made on the first run and kept: the next run's
  episodes continue their streams. A recurrent agent (`make_actor`, the
  final evaluation only) plays with its own actor, made at each run so that
  it starts from the learner's current parameters; the others with `policy`
  batched.
  """

  def __init__(self, make_environment: Callable[[int], dm_env.Environment],
               seeds: Sequence[int], policy: Callable,
               variable_client: variable_utils.VariableClient, random_key,
               policy_returns_extras: bool,
               make_actor: Optional[Callable[[], acme.Actor]] = None,
               make_first: Optional[Callable[[int],
                                             dm_env.Environment]] = None):
    self._make_environment = make_environment
    self._make_first = make_first or make_environment  # A camera's maker.
    self._policy_returns_extras = policy_returns_extras
    self._seeds = list(seeds)
    # A recurrent agent's `policy` is what its actor takes, not a callable.
    self._policy_step = (jax.jit(policy, backend='cpu') if make_actor is None
                         else None)
    self._variable_client = variable_client
    self._random_key = random_key
    self._make_actor = make_actor
    self._environments = None

  @property
  def episodes(self) -> int:
    return len(self._seeds)

  def run(self, film_to: str = '') -> Dict[str, Any]:
    """The episodes, with the learner's parameters as they are now; with
    `film_to`, the first one filmed there (its Clip under 'clip', None
    when it cannot be filmed)."""
    if self._environments is None:
      self._environments = [self._make_first(self._seeds[0])] + [
          self._make_environment(seed) for seed in self._seeds[1:]]
    return filming(self._environments[0], film_to, self._play)

  def _play(self) -> Dict[str, List[float]]:
    if self._make_actor is not None:
      return play_with_actor(self._environments, self._make_actor())
    self._variable_client.update_and_wait()
    self._random_key, key = jax.random.split(self._random_key)
    return play_episodes(self._environments, self._policy_step,
                         self._variable_client.params, key,
                         self._policy_returns_extras)


def filming(environment, film_to: str, play: Callable[[], Dict[str, Any]]
            ) -> Dict[str, Any]:
  """`play()`'s result; with `film_to`, `environment`'s next episode filmed
  there where it is a camera, and its clip (or None) under 'clip'."""
  camera = getattr(environment, 'film_next', None) and environment
  if not film_to:
    return play()
  if camera:
    camera.film_next(film_to)
  result = play()
  return {**result, 'clip': camera.take() if camera else None}


class ActorEvaluation:
  """A recurrent agent's evaluations during a run: `episodes` episodes one
  after another in one environment, with the agent's own actor in Acme's
  loop, which fetches parameters as the builder's actor does."""

  def __init__(self, environment: dm_env.Environment, actor: acme.Actor,
               episodes: int):
    self._actor = actor
    self._episodes = episodes
    self._environment = environment  # A camera with eval_video_every.
    self._loop = acme.EnvironmentLoop(
        environment, actor, counter=None, logger=loggers.NoOpLogger(),
        should_update=True)

  def run(self, film_to: str = '') -> Dict[str, Any]:
    """The episodes; with `film_to`, the first filmed there (as
    Evaluation.run)."""
    return filming(self._environment, film_to, self._play)

  def _play(self) -> Dict[str, List[float]]:
    self._actor.update(wait=True)
    returns, lengths = [], []
    for _ in range(self._episodes):
      result = self._loop.run_episode()
      returns.append(float(result['episode_return']))
      lengths.append(int(result['episode_length']))
    return {'returns': returns, 'lengths': lengths}
