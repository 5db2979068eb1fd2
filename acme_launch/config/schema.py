"""Fields every experiment config shares, whatever its agent.

A config file in `configs/` calls `base_config(...)`, adds its agent's own
section, and returns the ConfigDict from `get_config()` (the ml_collections
convention, so `--config.field=value` overrides work). The CLI validates the
result once (`validate`); nothing deeper re-checks it.
"""

import math

import ml_collections

from acme_launch import errors
from acme_launch.plan import specs

LAUNCH_TYPES = ('local_mp', 'local_mt', 'test_mt', 'ray')
MAX_PROCESSES_PER_GROUP = 1024  # Actors, evaluators: processes on one machine.
MAX_ENVS_PER_ACTOR = 4096
MAX_FINAL_EVAL_EPISODES = 1000  # Played at once: one environment each.
# Where actors' policies run: in each actor, or one central inference node.
INFERENCE = ('actor', 'central')
MAX_INFERENCE_WAIT_MS = 1000.0


def base_config(*, agent: str, env_name: str, max_actor_steps: int,
                num_actors: int, eval_every_steps: int) -> ml_collections.ConfigDict:
  """Returns the shared fields with an agent's defaults filled in."""
  config = ml_collections.ConfigDict()
  config.agent = agent                      # Adapter in acme_launch/agents/.
  config.env_name = env_name                # TASK (gym), gymnasium:TASK,
                                            # dmc:DOMAIN-TASK, atari:GAME,
                                            # FAMILY:NAME (envs/registry.py).
  config.env_modules = ()                   # Modules imported first, in the
                                            # launcher and every node: they
                                            # register families of yours.
  config.env_backend = 'gym'                # gym: a Python env object per
                                            # env; envpool: one EnvPool per actor.
  config.env_max_episode_steps = 0          # 0 keeps the task's own limit.
  config.seed = 0                           # Per-node seeds derive from it.
  config.max_actor_steps = max_actor_steps  # Step budget (actor env steps).
  config.num_actors = num_actors            # Actor processes.
  config.envs_per_actor = 1                 # Environments each actor steps,
                                            # one batched policy call a step.
  config.envpool_async_envs = 0             # > envs_per_actor: EnvPool's async
                                            # mode, this many envs (0: off;
                                            # the gym backend ignores it).
  config.stagger_episode_starts = False     # EnvPool's async mode: each env's
                                            # first episode ends at a random
                                            # step (envs/envpool_backend.py).
  config.inference = 'actor'                # 'actor': each actor runs its
                                            # policy; 'central': one inference
                                            # node answers every actor's calls
                                            # in batches (program/inference.py).
  config.inference_wait_ms = 2.0            # central: how long a batch waits
                                            # for more actors' calls.
  config.num_evaluators = 1                 # Evaluator processes.
  config.eval_every_steps = eval_every_steps  # Actor steps between evaluations.
  config.eval_episodes = 1                  # Episodes per evaluation.
  config.final_eval_episodes = 10           # At the budget, with the final
                                            # parameters (0: none).
  config.log_every_seconds = 10.0           # Actor and learner metric rows at
                                            # most this often (every evaluation
                                            # is a row).
  config.eval_video_every = 0               # K > 0: film the first episode of
                                            # every K-th evaluation and of the
                                            # final one into videos/ (0: none).
  config.eval_video_size = 480              # Their MuJoCo and dm_control
                                            # frames, square, in pixels.

  config.checkpoint = ml_collections.ConfigDict()
  config.checkpoint.interval_minutes = 5.0  # Learner/counter save period.
  config.checkpoint.max_to_keep = 2         # Checkpoints kept per component.
  config.checkpoint.replay = True           # Also checkpoint the Reverb tables.

  config.resources = specs.default_resources_config()
  return config


def central_inference(config: ml_collections.ConfigDict) -> bool:
  """Whether the program has the central inference node."""
  return config.get('inference', 'actor') == 'central'


def add_missing_fields(config: ml_collections.ConfigDict) -> None:
  """A config saved by an older version gets the shared fields added since,
  at their defaults (e.g. final_eval_episodes), so its run resumes."""
  defaults = base_config(
      agent=config.agent, env_name=config.env_name,
      max_actor_steps=config.max_actor_steps, num_actors=config.num_actors,
      eval_every_steps=config.eval_every_steps)
  for key in defaults.keys():
    if key not in config:
      config[key] = defaults[key]


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises LaunchError with one line for the first bad field found."""
  positive_ints = ('max_actor_steps', 'num_actors', 'envs_per_actor',
                   'eval_every_steps', 'eval_episodes')
  for name in positive_ints:
    if config[name] <= 0:
      raise errors.LaunchError(
          f'config.{name} must be a positive integer, got {config[name]}')
  if not 0 <= config.final_eval_episodes <= MAX_FINAL_EVAL_EPISODES:
    raise errors.LaunchError(
        'config.final_eval_episodes must be between 0 and '
        f'{MAX_FINAL_EVAL_EPISODES}, got {config.final_eval_episodes}')
  if config.get('inference', 'actor') not in INFERENCE:
    raise errors.LaunchError(
        f"config.inference must be one of {', '.join(INFERENCE)}, got "
        f"{config.inference!r}")
  wait_ms = config.get('inference_wait_ms', 2.0)
  if not 0 <= wait_ms <= MAX_INFERENCE_WAIT_MS:
    raise errors.LaunchError(
        f'config.inference_wait_ms must be between 0 and '
        f'{MAX_INFERENCE_WAIT_MS:g}, got {wait_ms}')
  if config.get('eval_video_every', 0) < 0:
    raise errors.LaunchError(
        'config.eval_video_every must be 0 (no videos) or more, got '
        f'{config.eval_video_every}')
  if not 16 <= config.get('eval_video_size', 480) <= 4096:
    raise errors.LaunchError(
        'config.eval_video_size must be between 16 and 4096 pixels, got '
        f'{config.eval_video_size}')
  if config.num_evaluators < 0:
    raise errors.LaunchError(
        f'config.num_evaluators must be >= 0, got {config.num_evaluators}')
  # Processes and environments on one machine: a typo's 10**9 would plan
  # for minutes or exhaust memory instead of failing here.
  for name, most in (('num_actors', MAX_PROCESSES_PER_GROUP),
                     ('num_evaluators', MAX_PROCESSES_PER_GROUP),
                     ('envs_per_actor', MAX_ENVS_PER_ACTOR)):
    if config[name] > most:
      raise errors.LaunchError(
          f'config.{name} must be at most {most}, got {config[name]}')
  async_envs = config.get('envpool_async_envs', 0)
  if async_envs < 0 or async_envs > MAX_ENVS_PER_ACTOR:
    raise errors.LaunchError(
        f'config.envpool_async_envs must be between 0 and '
        f'{MAX_ENVS_PER_ACTOR}, got {async_envs}')
  if (config.get('env_backend', 'gym') == 'envpool' and
      0 < async_envs <= config.envs_per_actor):
    raise errors.LaunchError(
        f'config.envpool_async_envs ({async_envs}) must be 0 (sync) or more '
        f'than config.envs_per_actor ({config.envs_per_actor}): EnvPool\'s '
        'async mode runs that many environments, each step receiving '
        f'envs_per_actor of them (e.g. --config.envpool_async_envs='
        f'{2 * config.envs_per_actor})')
  # Task family, backend and their packages; imported here, not at CLI start.
  from acme_launch import envs as environments
  environments.check_task(config.env_name, config.get('env_backend', 'gym'),
                          config.get('env_modules', ()))
  if config.seed < 0:
    raise errors.LaunchError(f'config.seed must be >= 0, got {config.seed}')
  if config.env_max_episode_steps < 0:
    raise errors.LaunchError('config.env_max_episode_steps must be >= 0 '
                             f'(0 keeps the task limit), got {config.env_max_episode_steps}')
  if not 0 < config.log_every_seconds < math.inf:  # Also refuses nan.
    raise errors.LaunchError('config.log_every_seconds must be > 0 and '
                             f'finite, got {config.log_every_seconds}')
  if not 0 < config.checkpoint.interval_minutes < math.inf:
    raise errors.LaunchError('config.checkpoint.interval_minutes must be > 0 '
                             f'and finite, got {config.checkpoint.interval_minutes}')
  if config.checkpoint.max_to_keep < 1:
    raise errors.LaunchError('config.checkpoint.max_to_keep must be >= 1, '
                             f'got {config.checkpoint.max_to_keep}')
