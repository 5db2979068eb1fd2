"""Central batched inference: one node answers every actor's policy calls.

With `config.inference='central'` the actors only step their environments
and write experience; each step they send their environments' observations
to the inference node (`InferenceServer`) and get the actions (and extras)
back. The node holds the learner's parameters (fetched as an actor fetches
them, `agents.make_variable_client`) and runs the policy for many actors in
one call: on its GPU when the plan gives it one, on its cores otherwise.
SEED RL and Sample Factory's policy workers do the same; with one
environment per actor (`r2d2_atari`, `impala_atari`), per-actor inference
is a batch of one.

Where state lives: in the node, per environment. A request is (actor,
observations, env ids, first): the rows one step of that actor's loop has.
The node keeps what the actor's own loop would keep, seeded the same way:

* feed-forward agents (`FeedForwardSteps`): each actor's key chain (split
  once a call, as `BatchedEnvironmentLoop` splits its key) and the data by
  which its policy differs from the others' (the adapter's
  `actor_policy_inputs`: DQN's Ape-X epsilons, one per environment). The
  policy is vmapped over the actors of a batch, so each actor's rows get
  the random draws its own loop would have drawn;
* recurrent agents (`RecurrentSteps`): every environment's state and key
  chain of the agent's actor core (R2D2's LSTM state and epsilon, IMPALA's
  LSTM state and logits), stacked over all actors' environments, stepped by
  `recurrent_actor.make_step` on the rows of a batch. An environment the
  node has not seen (a restarted node) starts with a fresh state.

The batching rule (`Requests.take`): each actor has at most one call in
flight, so a batch holds at most `num_actors` requests, each of
`envs_per_actor` rows (or EnvPool's async batch). Calls arrive on the
courier server's thread pool (sized above the number of actors, so every
actor's call can wait at once); the node's loop takes every request that
is waiting, and while fewer than all actors wait it waits for more up to
`inference_wait_ms` after the first arrived. A batch computes while the
next one gathers.
"""

import collections
import concurrent.futures
import threading
import time
from typing import Any, Callable, List, Optional, Sequence

from absl import logging
from acme_launch import compat  # JAX aliases; before acme
from acme.agents.jax import actor_core as actor_core_lib
from acme.jax import variable_utils
from acme.utils import counting
from acme.utils import loggers
import jax
import jax.numpy as jnp
import launchpad as lp
import numpy as np
import tree

from acme_launch import envs
from acme_launch.program import batched_actor
from acme_launch.program import recurrent_actor

# A request's arguments: (actor, observations, env ids, first).
Request = tuple


def _stack(values):
  return tree.map_structure(lambda *xs: np.stack(xs), *values)


def _concatenate(values):
  return tree.map_structure(lambda *xs: np.concatenate(xs), *values)


class FeedForwardSteps:
  """A feed-forward policy for many actors in one call: each actor's key
  chain (and policy inputs), the policy vmapped over the batch's actors.

  `policy`: the behaviour policy, (params, key, observations[, inputs]) ->
  actions, or (actions, extras) with `returns_extras`. `keys`: [A, 2], each
  actor's key as its own loop would start it. `inputs`: None, or one pytree
  per actor passed as the policy's fourth argument.
  """

  def __init__(self, policy: Callable, keys, returns_extras: bool,
               inputs: Optional[Sequence[Any]] = None):
    self._keys = jnp.asarray(keys)
    self._inputs = None if inputs is None else _stack(inputs)
    self._returns_extras = returns_extras

    def one(params, key, observations, actor_inputs):
      key, policy_key = jax.random.split(key)  # As BatchedEnvironmentLoop.
      if actor_inputs is None:
        return key, policy(params, policy_key, observations)
      return key, policy(params, policy_key, observations, actor_inputs)

    def step(params, keys, actors, observations, inputs):
      actor_inputs = None if inputs is None else tree.map_structure(
          lambda x: x[actors], inputs)
      new_keys, output = jax.vmap(one, in_axes=(None, 0, 0, 0))(
          params, keys[actors], observations, actor_inputs)
      return keys.at[actors].set(new_keys), output

    self._step = jax.jit(step)

  def __call__(self, params, requests: Sequence[Request]) -> List[Any]:
    """Each request's (actions, extras or None), in order."""
    results: List[Any] = [None] * len(requests)
    # Requests of one row count go into one call (an actor's count is fixed).
    groups = collections.defaultdict(list)
    for n, (_, observations, _, _) in enumerate(requests):
      shapes = tuple(np.shape(x) for x in tree.flatten(observations))
      groups[shapes].append(n)
    for members in groups.values():
      actors = np.array([requests[n][0] for n in members], np.int32)
      observations = _stack([requests[n][1] for n in members])
      self._keys, output = self._step(params, self._keys, actors,
                                      observations, self._inputs)
      actions, extras = batched_actor.actions_and_extras(
          output, self._returns_extras)
      for row, n in enumerate(members):
        results[n] = (actions[row], None if extras is None else
                      tree.map_structure(lambda x, r=row: x[r], extras))
    return results


class RecurrentSteps:
  """An Acme actor core for many actors' environments in one call: one
  state and key chain per environment of every actor, stacked.

  `keys`: [A * N, 2]: actor a's environment e at row a * N + e, its key as
  the actor's own loop would start its chain (N: environments per actor).
  """

  def __init__(self, core: actor_core_lib.ActorCore, keys, num_envs: int):
    self._keys = jnp.asarray(keys)
    self._num_envs = num_envs
    self._states = jax.vmap(core.init)(self._keys)  # Placeholders.
    self._seen = np.zeros(self._keys.shape[0], bool)
    self._step = jax.jit(recurrent_actor.make_step(core))

  def __call__(self, params, requests: Sequence[Request]) -> List[Any]:
    ids = np.concatenate([actor * self._num_envs + np.asarray(env_ids)
                          for actor, _, env_ids, _ in requests])
    # An environment this node has not seen starts with a fresh state.
    first = np.concatenate([r[3] for r in requests]) | ~self._seen[ids]
    self._seen[ids] = True
    observations = _concatenate([r[1] for r in requests])
    self._keys, self._states, actions, extras = self._step(
        params, self._keys, self._states, observations, ids, first)
    actions, extras = batched_actor.actions_and_extras((actions, extras),
                                                       True)
    results, start = [], 0
    for _, _, env_ids, _ in requests:
      rows = slice(start, start + len(env_ids))
      results.append((actions[rows],
                      tree.map_structure(lambda x, r=rows: x[r], extras)))
      start = rows.stop
    return results


class _Call:
  """One actor's call, waiting in a handler thread for its batch."""

  def __init__(self, args: Request):
    self.args = args
    self.actor = int(args[0])
    self.arrived = time.monotonic()
    self.done = threading.Event()
    self.result = None
    self.error: Optional[BaseException] = None


class Requests:
  """Calls waiting for a batch; see the module docstring for the rule."""

  def __init__(self, most: int, wait_seconds: float):
    self._most = most
    self._wait = wait_seconds
    self._pending: List[_Call] = []
    self._condition = threading.Condition()

  def put(self, call: _Call) -> None:
    with self._condition:
      self._pending.append(call)
      self._condition.notify()

  def take(self, timeout: float) -> List[_Call]:
    """The next batch: every waiting call (one per actor), once the first
    has waited `wait_seconds` or all `most` actors wait; [] after `timeout`
    seconds without any."""
    with self._condition:
      if not self._condition.wait_for(lambda: self._pending, timeout):
        return []
      deadline = self._pending[0].arrived + self._wait
      while len(self._pending) < self._most:
        left = deadline - time.monotonic()
        if left <= 0:
          break
        self._condition.wait(left)
      batch, later, actors = [], [], set()
      for call in self._pending:  # A second call of one actor: next batch.
        (later if call.actor in actors else batch).append(call)
        actors.add(call.actor)
      self._pending = later
      return batch

  def fail_all(self, error: BaseException) -> None:
    """Every waiting call raises `error` in its caller (the node stops)."""
    with self._condition:
      pending, self._pending = self._pending, []
    for call in pending:
      call.error = error
      call.done.set()


class InferenceServer:
  """The inference node's object: `step` is what actors call (courier
  handler threads), `run` the loop that answers them in batches."""

  def __init__(self, steps: Callable[[Any, Sequence[Request]], List[Any]],
               variable_client: variable_utils.VariableClient,
               num_actors: int, wait_seconds: float,
               logger: loggers.Logger):
    self._steps = steps
    self._variable_client = variable_client
    self._requests = Requests(num_actors, wait_seconds)
    self._logger = logger
    self._batches = self._calls = self._rows = 0
    self._seconds = 0.0  # Computing batches.

  def step(self, actor: int, observations, env_ids, first):
    """Actor `actor`'s policy call for rows `env_ids` of its environments:
    (actions, extras or None), as its own loop's policy would return."""
    call = _Call((int(actor), observations, np.asarray(env_ids),
                  np.asarray(first, bool)))
    self._requests.put(call)
    call.done.wait()
    if call.error is not None:
      raise call.error
    return call.result

  def run(self) -> None:
    try:
      self._serve()
    finally:  # No handler thread waits on a node that stopped.
      self._requests.fail_all(RuntimeError('the inference node stopped'))

  def _serve(self) -> None:
    stop = lp.stop_event()
    self._variable_client.update_and_wait()
    last_row, window = time.time(), [0, 0, 0.0]  # batches, calls, seconds
    while not stop.is_set():
      batch = self._requests.take(timeout=0.5)
      if batch:
        start = time.perf_counter()
        try:
          results = self._steps(self._variable_client.params,
                                [call.args for call in batch])
        except Exception as e:  # The callers see it; the node fails.
          for call in batch:
            call.error = e
            call.done.set()
          raise
        for call, result in zip(batch, results):
          call.result = result
          call.done.set()
        seconds = time.perf_counter() - start
        for _ in batch:  # Counted per call: see build.py.
          self._variable_client.update()
        self._batches += 1
        self._calls += len(batch)
        self._rows += sum(len(call.args[2]) for call in batch)
        self._seconds += seconds
        window[0] += 1
        window[1] += len(batch)
        window[2] += seconds
      if window[0] and time.time() - last_row >= 1.0:
        self._logger.write(self._row(window, time.time() - last_row))
        last_row, window = time.time(), [0, 0, 0.0]

  def _row(self, window, elapsed: float):
    batches, calls, seconds = window
    return {
        'batches': self._batches, 'calls': self._calls, 'rows': self._rows,
        # Since the start: what the bench reads.
        'mean_batch_calls': self._calls / max(self._batches, 1),
        'mean_batch_rows': self._rows / max(self._batches, 1),
        'batch_ms': 1e3 * self._seconds / max(self._batches, 1),
        # Since the last row.
        'recent_batch_calls': calls / batches,
        'calls_per_second': calls / elapsed,
        'busy_fraction': seconds / elapsed,
    }


class _Stopped(Exception):
  """The program stopped while an actor waited for the inference node."""


class _NoVariables:
  """Actors with central inference fetch no parameters."""

  params = None

  def update(self, wait: bool = False) -> None:
    del wait

  def update_and_wait(self) -> None:
    pass


class CentralInferenceLoop(batched_actor.BatchedEnvironmentLoop):
  """`BatchedEnvironmentLoop` whose policy calls go to the inference node.

  A call the node cannot answer (it died) is sent again once the node is
  back (the supervisor restarts it); the program's stop ends the wait.
  """

  def __init__(self, environments, inference, actor_index: int,
               adder: batched_actor.BatchedAdder, counter: counting.Counter,
               logger: loggers.Logger, max_actor_steps: int = 0):
    super().__init__(environments, None, _NoVariables(), adder, None,
                     counter, logger, max_actor_steps=max_actor_steps)
    self._inference = inference
    self._index = actor_index

  # EnvPool: the step is written while the node computes its actions.
  _record_while_selecting = True

  def _select_actions(self, timesteps: envs.TimeSteps):
    return self._start_selecting(timesteps)()

  def _start_selecting(self, timesteps: envs.TimeSteps):
    args = (self._index, timesteps.observation, timesteps.env_id,
            timesteps.first())
    future = self._inference.futures.step(*args)
    return lambda: self._wait(future, args)

  def _wait(self, future, args):
    """The node's answer to `args`; sent again while the node is down."""
    stop = lp.stop_event()
    while True:
      while True:
        try:
          return future.result(timeout=1.0)
        except concurrent.futures.TimeoutError:
          if stop.is_set():
            future.cancel()
            raise _Stopped() from None
        except Exception as e:  # pylint: disable=broad-except
          logging.warning('The inference node did not answer (%s: %s); '
                          'calling again.', type(e).__name__, e)
          if stop.wait(1.0):
            raise _Stopped() from None
          break
      future = self._inference.futures.step(*args)

  def run(self) -> None:
    try:
      super().run()
    except _Stopped:
      pass
