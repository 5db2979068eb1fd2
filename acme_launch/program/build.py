"""Builds the Launchpad program: the whole topology on one screen.

Small `build_*` functions each return one node's object; `make_program` adds
the nodes group by group, each under the label its resource placement names.
Built from Acme's builder interface (any `ActorLearnerBuilder`), not from an
agent's `Distributed*` class, so every agent shares this one launch path.
"""

import dataclasses
import functools
import json
import sys
from typing import Any, Dict, List, Tuple

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.utils import counting
from acme.utils import loggers
import jax
import launchpad as lp
import ml_collections
import numpy as np
import tree

from acme_launch import agents
from acme_launch.agents import evaluation_policy
from acme_launch.program import batched_actor
from acme_launch.adders import batched as batched_adders
from acme_launch.program import checkpointing
from acme_launch.program import inference as inference_lib
from acme_launch.program import recurrent_actor
from acme_launch import envs as environments
from acme_launch.envs import video
from acme_launch import errors
from acme_launch.config import schema
from acme_launch.program import evaluation
from acme_launch.program import nodes
from acme_launch.plan import resources
from acme_launch.program import seeds as seeds_lib
from acme_launch.plan import topology


def program_nodes(config: ml_collections.ConfigDict
                  ) -> Tuple[topology.Node, ...]:
  return topology.program_nodes(config.num_actors, config.num_evaluators,
                                schema.central_inference(config))


def node_list(config: ml_collections.ConfigDict) -> List[Tuple[str, int]]:
  """The nodes the resource plan places, as (group, index), in launch order."""
  return topology.node_list(config.num_actors, config.num_evaluators,
                            schema.central_inference(config))


# How the final evaluation draws its episodes' seeds, recorded in the run's
# config.json ('final_eval_seeds') so that use/evaluate.py replays them:
# consecutive from one drawn value (envs.consecutive_seeds), one EnvPool.
# Runs without the record drew unrelated values, node_seed(seed,
# 'final_eval', j).
FINAL_EVAL_SEEDS = 'consecutive'


def node_seeds(config: ml_collections.ConfigDict) -> Dict[str, int]:
  """The seed of every node that has one, by node name."""
  return {f'{group}/{index}': environments.node_seed(config.seed, group, index)
          for group, index in node_list(config)}


def actor_num_envs(config: ml_collections.ConfigDict) -> int:
  """The environments one actor steps: EnvPool's async mode runs more than
  a step receives."""
  async_envs = config.get('envpool_async_envs', 0)
  if (config.get('env_backend', 'gym') == 'envpool' and
      async_envs > config.envs_per_actor):
    return async_envs
  return config.envs_per_actor


def env_seeds(seed: int, num_seeds: int) -> List[int]:
  """An actor's environment seeds from its own (the first): also the seeds
  of its environments' key chains (EnvPool's async mode runs more
  environments than it takes seeds: theirs continue the sequence)."""
  return [seed] + [environments.node_seed(seed, 'env', j)
                   for j in range(1, num_seeds)]


@dataclasses.dataclass(frozen=True)
class BuiltProgram:
  program: lp.Program
  # Node names per Launchpad label, in the order their tasks are numbered.
  nodes_by_label: Dict[str, List[str]]
  # What a checkpoint depends on: resuming with a different one is refused.
  identity: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # What the agent sees of the environment (acme.specs.EnvironmentSpec).
  environment_spec: Any = None


def run_identity(config: ml_collections.ConfigDict,
                 environment_spec: specs.EnvironmentSpec) -> Dict[str, Any]:
  """Agent, task, network sizes and spec shapes, as JSON-comparable values."""
  shapes = lambda spec: [list(s.shape) for s in tree.flatten(spec)]
  network = config.get('network')
  return json.loads(json.dumps({
      'agent': config.agent,
      'env_name': config.env_name,
      'network': network.to_dict() if network is not None else None,
      'observation_shapes': shapes(environment_spec.observations),
      'action_shapes': shapes(environment_spec.actions),
  }))


def make_program(config: ml_collections.ConfigDict,
                 plan: resources.ResourcePlan, run_dir: str) -> BuiltProgram:
  """Returns the program; nothing runs until it is launched."""
  adapter = agents.load(config.agent)
  central = schema.central_inference(config)
  if central:
    problem = agents.central_inference_problem(adapter)
    if problem:
      raise errors.LaunchError(
          f"config.inference='central' cannot serve config.agent "
          f"{config.agent}: {problem}; use config.inference='actor'")
  batched_recurrent = adapter.recurrent and (config.envs_per_actor > 1 or
                                             central)
  if batched_recurrent and adapter.make_actor_core is None:
    raise errors.LaunchError(
        f'config.agent {config.agent} keeps recurrent state and has no '
        'make_actor_core, so its actors step one environment each: set '
        f'config.envs_per_actor=1 (got {config.envs_per_actor})')
  backend = config.get('env_backend', 'gym')  # Runs saved before it: gym.
  make_env = functools.partial(
      environments.make_environment, config.env_name,
      max_episode_steps=config.env_max_episode_steps, backend=backend,
      config=config)
  try:
    environment_spec = specs.make_environment_spec(make_env(seed=0))
  except errors.LaunchError:
    raise
  except Exception as e:
    # gym raises many types for an unknown or broken task: report it as input.
    message = ' '.join(str(e).split())[:300]
    raise errors.LaunchError(
        f'cannot make environment {config.env_name!r}: {type(e).__name__}: '
        f'{message}') from e
  builder = agents.call(
      adapter, 'make_builder', config, learner_logger_fn=functools.partial(
          nodes.MetricsLogger, run_dir, 'learner/0', config.log_every_seconds,
          'learner_steps'),
      environment_spec=environment_spec)
  # What the nodes will call, tried once here: an adapter that raises is one
  # line before any process starts, not a node failing after launch.
  for evaluating in (False, True):
    networks = agents.call(adapter, 'make_networks', config, environment_spec)
    policy = agents.call(adapter, 'make_policy', config, networks,
                         environment_spec, evaluating)
    if batched_recurrent and not evaluating:
      agents.call(adapter, 'make_actor_core', config, networks, policy)
    if central and not evaluating and adapter.actor_policy_inputs:
      agents.call(adapter, 'actor_policy_inputs', config, 0)
  seeds = node_seeds(config)

  def logger_for(node: str) -> loggers.Logger:
    return nodes.MetricsLogger(run_dir, node, config.log_every_seconds)

  def build_replay():
    return builder.make_replay_tables(environment_spec)

  final_evaluation = config.num_evaluators > 0 and config.final_eval_episodes > 0

  def build_counter():
    # The steps limiter runs in the counter's process: it reads the counts
    # there, without a process (and a TF and JAX import) of its own.
    limiter = nodes.StepsLimiter(config.max_actor_steps, run_dir,
                                 stop_at_budget=not final_evaluation)
    return checkpointing.CheckpointedCounter(run_dir, config.checkpoint,
                                             watch=limiter.poll)

  learner_devices = plan.placement('learner/0').devices

  def build_learner(replay, counter):
    if learner_devices > 1:  # Acme's learners pmap over all they see.
      check_learner_devices(learner_devices)
    random_key = jax.random.PRNGKey(seeds['learner/0'])
    networks = adapter.make_networks(config, environment_spec)
    iterator = builder.make_dataset_iterator(replay)
    learner = builder.make_learner(
        random_key, networks, iterator, replay,
        # Synced with the counter node once a second, not on every SGD step
        # (a blocking call each): the counts lag by at most that second.
        counting.Counter(counter, 'learner', time_delta=1.))
    return checkpointing.CheckpointedLearner(learner, run_dir,
                                             config.checkpoint)

  def build_inference(learner):
    # Each actor's (and environment's) key chain as its own loop would
    # start it; fresh after this node restarts.
    actor_seeds = [seeds_lib.seed_after_restarts(seeds[f'actor/{i}'])
                   for i in range(config.num_actors)]
    num_envs = actor_num_envs(config)
    networks = adapter.make_networks(config, environment_spec)
    if adapter.recurrent:
      policy = adapter.make_policy(config, networks, environment_spec,
                                   evaluation=False)
      steps = inference_lib.RecurrentSteps(
          adapter.make_actor_core(config, networks, policy),
          np.stack([jax.random.PRNGKey(s) for seed in actor_seeds
                    for s in env_seeds(seed, num_envs)]), num_envs)
    else:
      inputs = None
      if adapter.actor_policy_inputs is not None:
        inputs = [adapter.actor_policy_inputs(config, i)
                  for i in range(config.num_actors)]
        inputs = None if all(x is None for x in inputs) else inputs
      # One policy for every actor: differences by actor are the inputs.
      policy = (adapter.make_policy(config, networks, environment_spec,
                                    evaluation=False) if inputs is not None
                else agents.make_actor_policy(adapter, config, networks,
                                              environment_spec, 0))
      steps = inference_lib.FeedForwardSteps(
          policy, np.stack([jax.random.PRNGKey(s) for s in actor_seeds]),
          adapter.policy_returns_extras, inputs)
    return inference_lib.InferenceServer(
        # Fetched every update_period steps of each actor, as its own
        # client would: the node updates once a call.
        steps, agents.make_variable_client(
            adapter, config, learner, device=jax.default_backend(),
            updates_per_fetch=config.num_actors),
        config.num_actors, config.get('inference_wait_ms', 2.0) / 1e3,
        logger_for('inference/0'))

  def make_adder(replay, num_envs):
    if adapter.batched_adder:  # PPO: bulk sequence writes.
      return builder.make_batched_adder(replay, environment_spec, num_envs)
    return batched_adders.PerEnvAdders(
        [builder.make_adder(replay) for _ in range(num_envs)])

  def build_actor(index, replay, learner, counter, inference=None):
    seed = seeds_lib.seed_after_restarts(seeds[f'actor/{index}'])
    actor_counter = counting.Counter(counter, 'actor', time_delta=0.)
    if not central:
      networks = adapter.make_networks(config, environment_spec)
      policy = agents.make_actor_policy(adapter, config, networks,
                                        environment_spec, index)
    if config.envs_per_actor == 1 and not central:  # Acme's own actor, loop.
      actor = builder.make_actor(jax.random.PRNGKey(seed), policy,
                                 adder=builder.make_adder(replay),
                                 variable_source=learner)
      return nodes.BudgetedEnvironmentLoop(
          make_env(seed=seed), actor, actor_counter,
          logger_for(f'actor/{index}'),
          max_actor_steps=config.max_actor_steps)
    # EnvPool's worker threads: the actor's omp_threads (0, unset: 1).
    num_threads = plan.placement(f'actor/{index}').threads or 1
    envs = environments.make_environments(
        config.env_name, env_seeds(seed, config.envs_per_actor),
        config.env_max_episode_steps, backend,
        num_threads, async_envs=config.get('envpool_async_envs', 0),
        config=config,
        stagger_starts=config.get('stagger_episode_starts', False))
    if central:  # Policy calls to the inference node, one a step.
      return inference_lib.CentralInferenceLoop(
          envs, inference, index, make_adder(replay, envs.num_envs),
          actor_counter, logger_for(f'actor/{index}'),
          max_actor_steps=config.max_actor_steps)
    if adapter.recurrent:  # One state per environment, one call a step.
      key_seeds = env_seeds(seed, envs.num_envs)
      return recurrent_actor.RecurrentBatchedEnvironmentLoop(
          envs, adapter.make_actor_core(config, networks, policy),
          agents.make_variable_client(adapter, config, learner),
          batched_adders.PerEnvAdders(
              [builder.make_adder(replay) for _ in range(envs.num_envs)]),
          np.stack([jax.random.PRNGKey(s) for s in key_seeds]),
          actor_counter, logger_for(f'actor/{index}'),
          max_actor_steps=config.max_actor_steps)
    return batched_actor.BatchedEnvironmentLoop(
        envs, policy,
        agents.make_variable_client(adapter, config, learner),
        make_adder(replay, envs.num_envs), jax.random.PRNGKey(seed),
        actor_counter,
        logger_for(f'actor/{index}'), max_actor_steps=config.max_actor_steps,
        policy_returns_extras=adapter.policy_returns_extras)

  def build_evaluator(index, learner, counter):
    seed = seeds_lib.seed_after_restarts(seeds[f'evaluator/{index}'])
    make_eval_env = lambda s: make_env(seed=s, evaluation=True)
    video_every = config.get('eval_video_every', 0) if index == 0 else 0
    make_filmed = filmed_maker(video_every)
    policy = evaluation_policy.make(adapter, config, environment_spec).policy
    if adapter.recurrent:  # Its policy keeps state: one episode at a time.
      during = evaluation.ActorEvaluation(
          (make_filmed or make_eval_env)(seed), builder.make_actor(
              jax.random.PRNGKey(seed), policy, variable_source=learner),
          config.eval_episodes)
    else:  # All the episodes at once, one batched policy call a step.
      during = evaluation.Evaluation(
          make_eval_env,
          [environments.node_seed(seed, 'eval', j)
           for j in range(config.eval_episodes)],
          policy, agents.make_variable_client(adapter, config, learner),
          jax.random.PRNGKey(seed), adapter.policy_returns_extras,
          make_first=make_filmed)
    final = None
    if final_evaluation and index == 0:  # One evaluator plays it.
      final_key = jax.random.PRNGKey(
          environments.node_seed(seed, 'final_eval_key', 0))
      final = evaluation.Evaluation(
          make_eval_env,
          environments.consecutive_seeds(seed, 'final_eval',
                                         config.final_eval_episodes),
          policy,
          agents.make_variable_client(adapter, config, learner),
          final_key, adapter.policy_returns_extras,
          make_actor=functools.partial(builder.make_actor, final_key, policy,
                                       variable_source=learner)
          if adapter.recurrent else None, make_first=make_filmed)
    # Every evaluation a row: they come once per eval_every_steps at most,
    # and a population's score at a boundary is the first one there.
    return nodes.ScheduledEvaluator(
        during, counter, nodes.MetricsLogger(run_dir, f'evaluator/{index}'),
        config.eval_every_steps, max_actor_steps=config.max_actor_steps,
        run_dir=run_dir, final_evaluation=final, video_every=video_every,
        video_name=topology.file_stem(f'evaluator/{index}'))

  def filmed_maker(video_every: int):
    """With `video_every`, the maker of an evaluator's first environment:
    in a camera (envs/video.py), off-screen OpenGL chosen before MuJoCo's
    import; EnvPool, which does not render, plays it on the gym backend."""
    if not video_every:
      return None
    video.choose_gl()
    warn = lambda line: print(f'evaluator: {line}', file=sys.stderr,
                              flush=True)
    return lambda seed: video.camera(
        make_env(seed=seed, evaluation=True, backend='gym'), warn,
        config.get('eval_video_size', video.SIZE))

  program = lp.Program(name=f'{config.agent}_{config.env_name}')
  nodes_by_label: Dict[str, List[str]] = {}

  def add(node: str, lp_node):
    label = plan.placement(node).label
    nodes_by_label.setdefault(label, []).append(node)
    with program.group(label):
      return program.add_node(lp_node)

  replay = add('replay/0', checkpointing.ReplayNode(
      build_replay, run_dir, config.checkpoint))
  counter = add('counter/0', lp.CourierNode(build_counter))
  learner = add('learner/0', lp.CourierNode(build_learner, replay, counter))
  inference = None
  if central:
    # A handler thread for every actor's call, and some for other calls.
    inference = add('inference/0', lp.CourierNode(
        build_inference, learner,
        courier_kwargs={'thread_pool_size': max(16, config.num_actors + 4)}))
  for i in range(config.num_actors):
    add(f'actor/{i}', lp.CourierNode(build_actor, i, replay, learner, counter,
                                     inference))
  for i in range(config.num_evaluators):
    add(f'evaluator/{i}', lp.CourierNode(build_evaluator, i, learner, counter))
  return BuiltProgram(program, nodes_by_label,
                      run_identity(config, environment_spec),
                      environment_spec)


def check_learner_devices(planned: int) -> None:
  """In the learner's process: it has the devices the plan gave it (its
  GPUs, or the CPU split by the plan's XLA flag). Acme's IMPALA and R2D2
  learners pmap over all of them, and the builder split the batch by the
  plan's count."""
  devices = jax.local_devices()
  if len(devices) != planned:
    raise RuntimeError(
        f'the learner was planned on {planned} devices '
        f'(config.resources.learner.num_devices) but its process has '
        f'{len(devices)}: {", ".join(map(str, devices))}')


def describe_spec(environment_spec) -> str:
  """Lines such as `observations: float32 (17,) in [-inf, inf]`."""
  def one(spec) -> str:
    text = f'{np.dtype(spec.dtype).name} {tuple(spec.shape)}'
    if hasattr(spec, 'num_values'):
      return f'{text}, {spec.num_values} values'
    if hasattr(spec, 'minimum'):
      low, high = np.min(spec.minimum), np.max(spec.maximum)
      return f'{text} in [{low:g}, {high:g}]'
    return text

  lines = []
  for field in ('observations', 'actions', 'rewards', 'discounts'):
    spec = getattr(environment_spec, field)
    leaves = tree.flatten_with_path(spec)
    if len(leaves) == 1 and not leaves[0][0]:
      lines.append(f'{field}: {one(spec)}')
    else:
      lines.extend(f'{field}.{".".join(map(str, path))}: {one(leaf)}'
                   for path, leaf in leaves)
  return '\n'.join(lines)
