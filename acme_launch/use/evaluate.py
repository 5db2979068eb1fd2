"""Plays a run's policy again: N episodes from a learner checkpoint.

`python -m acme_launch.evaluate RUN_DIR` (acme_launch/evaluate.py) and
`acme_launch.evaluate_run(...)` come here. The episodes play in this
process, with no Launchpad program, Reverb server or port: the parameters
come from the learner checkpoint (restore.py), the policy from where the
evaluator node makes it (agents/evaluation_policy.py), and the episodes
from the evaluator's own loops (program/evaluation.py): a feed-forward
agent's all at once, one batched policy call a step; a recurrent one's one
after another with its builder's actor. A feed-forward agent on EnvPool
plays the same steps in as few pools as its seeds allow, all stepped at
once (use/episodes.py): the final evaluation's and --seed's consecutive
seeds one pool (a run made before the final evaluation drew consecutive
seeds: its unrelated ones a pool each). With the final evaluation's
seeds and key (the default) and the checkpoint its parameters were saved
in, the episodes are the final evaluation's, return for return.

The figures are a run's summary's (stats/spread.py's median, lowest,
highest and split; with 10 episodes or more the IQM and its 95% bootstrap
interval, stats/library.py), printed and written to a new file under
RUN_DIR/evaluations/, which no node of the run writes. Bad input is one
line (errors.LaunchError) before any episode plays, and then nothing is
written.
"""

import dataclasses
import datetime
import functools
import itertools
import os
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from acme_launch import errors
from acme_launch import layout
from acme_launch.stats import library
from acme_launch.stats import metrics
from acme_launch.stats import spread
from acme_launch.use import restore

IQM_MIN_EPISODES = 10   # Fewer: no interval is worth giving.


@dataclasses.dataclass(frozen=True)
class Request:
  """What to evaluate: the run's saved config unless `config` is given
  (the same with overrides), its final evaluation's seeds unless `seed`."""
  run_dir: str
  episodes: int = 0          # 0: the config's final_eval_episodes.
  checkpoint: str = ''       # '': the newest learner checkpoint.
  sample: bool = False       # The acting policy, not the evaluator's.
  seed: Optional[int] = None
  config: Any = None
  video: bool = False
  video_episodes: int = 0    # 0: every episode filmed (with video).


def spec_problem(saved_spec, spec) -> Optional[str]:
  """Why an agent trained on `saved_spec` cannot act in `spec`, or None."""
  import tree

  def shapes(s):
    return [(tuple(x.shape), np.dtype(x.dtype).name,
             getattr(x, 'num_values', None)) for x in tree.flatten(s)]

  for what in ('observations', 'actions'):
    trained, now = (shapes(getattr(s, what)) for s in (saved_spec, spec))
    if trained != now:
      return f'its {what} are {now}, the run trained on {trained}'
  return None


def _environment_maker(config) -> Callable[..., Any]:
  from acme_launch import envs as environments
  return functools.partial(
      environments.make_environment, config.env_name,
      max_episode_steps=config.env_max_episode_steps,
      backend=config.get('env_backend', 'gym'), config=config)


def _spec(config):
  return spec_and_action_bounds(config)[0]


def spec_and_action_bounds(config):
  """(the environment spec the agent sees, envs.task_action_bounds: the
  task's own continuous action bounds or None) of the config's task.
  LaunchError: one line."""
  from acme import specs
  from acme_launch import envs as environments
  try:
    environment = _environment_maker(config)(seed=0)
    try:
      return (specs.make_environment_spec(environment),
              environments.task_action_bounds(environment))
    finally:
      environment.close()
  except errors.LaunchError:
    raise
  except Exception as e:  # gym raises many types for an unknown task.
    raise errors.LaunchError(
        f'cannot make environment {config.env_name!r}: {type(e).__name__}: '
        f'{" ".join(str(e).split())[:300]}') from None


def final_eval_seeds(run: restore.Run, seed: int, played: int,
                     episodes: int) -> List[int]:
  """The final evaluation's `played` seeds as the run drew them
  (program/build.py), then `episodes - played` more, which it never played.

  A run that records 'final_eval_seeds': 'consecutive' drew consecutive
  seeds: the more ones continue them (one EnvPool for all) unless that
  passes 2**31. Runs made before it drew unrelated values, a pool each on
  EnvPool; their more ones are consecutive from another drawn value."""
  from acme_launch import envs as environments
  if run.saved.get('final_eval_seeds') == 'consecutive':
    seeds = environments.consecutive_seeds(seed, 'final_eval', played)
    if played and seeds[0] + episodes <= 2**31:
      return [seeds[0] + j for j in range(episodes)]
  else:
    seeds = [environments.node_seed(seed, 'final_eval', j)
             for j in range(played)]
  return seeds + environments.consecutive_seeds(seed, 'final_eval_more',
                                                episodes - played)


def seeds_and_key(run: restore.Run, request: Request, episodes: int):
  """The episodes' environment seeds and the policy's key: the final
  evaluation's (program/build.py; its own episodes are the saved config's
  final_eval_episodes), or drawn from `request.seed`: consecutive seeds,
  one pool on EnvPool."""
  import jax
  from acme_launch import envs as environments
  if request.seed is None:
    seed = run.saved.get('node_seeds', {}).get('evaluator/0')
    if seed is None:
      seed = environments.node_seed(run.config.seed, 'evaluator', 0)
    played = min(episodes, int(run.saved.get('config', {}).get(
        'final_eval_episodes', run.config.final_eval_episodes)))
    return (final_eval_seeds(run, seed, played, episodes),
            jax.random.PRNGKey(environments.node_seed(seed, 'final_eval_key',
                                                      0)))
  return (environments.consecutive_seeds(request.seed, 'evaluate', episodes),
          jax.random.PRNGKey(environments.node_seed(request.seed,
                                                    'evaluate_key', 0)))


@dataclasses.dataclass(frozen=True)
class Prepared:
  """Everything checked before an episode plays."""
  run: restore.Run
  restored: restore.Restored
  policy: Any                # agents.evaluation_policy.EvaluationPolicy
  builder: Any               # For a recurrent agent's actor; else None.
  seeds: List[int]
  key: Any


def prepare(request: Request) -> Prepared:
  """The run, its checkpoint's parameters and the policy, checked against
  each other and the task. LaunchError: one line, nothing written."""
  from acme.utils import loggers
  from acme_launch import agents
  from acme_launch.agents import evaluation_policy
  if not os.path.isdir(request.run_dir):
    raise errors.LaunchError(f'{request.run_dir} is not a run directory '
                             '(no such folder)')
  run = restore.read_run(request.run_dir, request.config)
  if not os.access(request.run_dir, os.W_OK):
    raise errors.LaunchError(
        f'{request.run_dir} is not writable: the evaluation writes its '
        'figures to evaluations/ in it')
  episodes = request.episodes or run.config.final_eval_episodes
  if episodes < 1 or request.video_episodes < 0:
    raise errors.LaunchError(
        f'--episodes must be 1 or more (got {episodes}) and --video_episodes '
        f'0 or more (got {request.video_episodes})')
  restored = restore.restore(run, request.checkpoint)
  spec = _spec(run.config)
  if request.config is not None:  # Another task or setting: same spaces?
    saved = restore.read_run(request.run_dir).config
    if (saved.env_name, saved.get('env_backend')) != (
        run.config.env_name, run.config.get('env_backend')):
      problem = spec_problem(_spec(saved), spec)
      if problem:
        raise errors.LaunchError(
            f'cannot evaluate on {run.config.env_name}: {problem}')
  policy = evaluation_policy.make(run.adapter, run.config, spec,
                                  sample=request.sample)
  builder = None
  if policy.recurrent:
    builder = agents.call(
        run.adapter, 'make_builder', run.config,
        learner_logger_fn=lambda *a, **k: loggers.NoOpLogger(),
        environment_spec=spec)
  restore.check_fits(policy, restored.params, builder, restored.checkpoint)
  seeds, key = seeds_and_key(run, request, episodes)
  return Prepared(run, restored, policy, builder, seeds, key)


def play(prepared: Prepared, make_environment=None,
         filmed: int = 0) -> Dict[str, List[float]]:
  """The episodes, as the evaluator plays them (program/evaluation.py).
  `make_environment(seed, index)`: the environment of each of the first
  `filmed` episodes (all of them when `filmed` is 0: --video); the others'
  the task's evaluation environments. A feed-forward agent on EnvPool
  plays in as few pools as its seeds allow (use/episodes.py)."""
  config = prepared.run.config
  if config.get('env_backend', 'gym') == 'envpool' and (
      not prepared.policy.recurrent):
    return _play_pooled(prepared, make_environment,
                        filmed if make_environment else 0)
  return play_as_evaluator(prepared, make_environment)


def play_as_evaluator(prepared: Prepared, make_environment=None
                      ) -> Dict[str, List[float]]:
  """The episodes as the evaluator node plays them, with its own loops
  (program/evaluation.py), an environment each."""
  from acme_launch import agents
  from acme_launch.program import evaluation
  policy, params = prepared.policy, prepared.restored.params
  make = _environment_maker(prepared.run.config)
  made = itertools.count()  # Made in the seeds' order, one each.
  make_eval_env = (
      (lambda s: make(seed=s, evaluation=True)) if make_environment is None
      else (lambda s: make_environment(s, next(made))))
  source = restore.ParamsSource(params)
  make_actor = None
  if policy.recurrent:
    make_actor = functools.partial(policy.make_actor, prepared.builder,
                                   prepared.key, source)
  return evaluation.Evaluation(
      make_eval_env, prepared.seeds, policy.policy,
      agents.make_variable_client(policy.adapter, policy.config, source),
      prepared.key, policy.adapter.policy_returns_extras,
      make_actor=make_actor).run()


def _play_pooled(prepared: Prepared, make_environment, filmed: int
                 ) -> Dict[str, List[float]]:
  """As play_as_evaluator's Evaluation.run, the environments in EnvPool
  pools of consecutive seeds (the first `filmed` from make_environment)."""
  import jax
  from acme_launch import agents
  from acme_launch import envs as environments
  from acme_launch.use import episodes
  config, policy = prepared.run.config, prepared.policy
  client = agents.make_variable_client(
      policy.adapter, policy.config,
      restore.ParamsSource(prepared.restored.params))
  client.update_and_wait()
  _, key = jax.random.split(prepared.key)  # As Evaluation.run splits it.
  seeds = prepared.seeds
  singles = [(make_environment(seeds[j], j), j) for j in range(filmed)]
  pools = []
  try:
    for start, length in episodes.consecutive_runs(seeds[filmed:]):
      start += filmed
      pools.append((environments.EnvPoolEnvironments(
          config.env_name, length, seeds[start], config.env_max_episode_steps,
          num_threads=min(length, os.cpu_count() or 1), evaluation=True),
                    np.arange(start, start + length)))
    return episodes.play_episodes(
        pools, singles, policy.policy, client.params,
        key, policy.adapter.policy_returns_extras)
  finally:  # A filmed environment closes itself at its episode's end.
    for pool, _ in pools:
      pool.close()


def figures(returns: List[float], lengths: List[int]) -> Dict[str, Any]:
  """A run summary's figures of these episodes (stats/), with the IQM and
  its 95% bootstrap interval from IQM_MIN_EPISODES episodes on."""
  shape = spread.episode_spread(returns)
  iqm = None
  if len(returns) >= IQM_MIN_EPISODES:
    value, low, high = library.interval(np.asarray(returns, float)[:, None],
                                        metrics.iqm)
    iqm = {'value': value, 'low': low, 'high': high}
  return {'episodes': len(returns), 'returns': list(map(float, returns)),
          'lengths': list(map(int, lengths)),
          'return_mean': shape['mean'], 'return_std': shape['std'],
          'return_median': shape['median'], 'return_min': shape['min'],
          'return_max': shape['max'], 'split': shape['split_sentence'],
          'return_iqm': iqm,
          'length_mean': float(np.mean(lengths))}


def episode_lines(result: Dict[str, Any]) -> List[str]:
  return [f'episode {j:>4}  seed {seed:>10}  return {ret:>10.1f}  length '
          f'{length:>6}' for j, (seed, ret, length) in enumerate(
              zip(result['seeds'], result['returns'], result['lengths']))]


def summary_text(result: Dict[str, Any]) -> str:
  """The figures in a run summary's words (run/summary.py)."""
  checkpoint = os.path.basename(result['checkpoint'])
  lines = [
      f'eval return        {result["return_mean"]:.1f} +- '
      f'{result["return_std"]:.1f} ({result["episodes"]} episodes, '
      f'{result["policy"]} policy, learner checkpoint {checkpoint})',
      f'eval spread        median {result["return_median"]:.1f}, lowest '
      f'{result["return_min"]:.1f}, highest {result["return_max"]:.1f}']
  if result['split']:
    lines.append(f'eval split         {result["split"]}')
  if result['return_iqm']:
    lines.append(f'eval IQM           {library.estimate_text(result["return_iqm"])}'
                 ' (95% bootstrap interval)')
  return '\n'.join(lines)


def new_stem(run_dir: str, checkpoint: str, folder: bool) -> str:
  """A new name under RUN_DIR/evaluations/ for this evaluation (the time and
  the checkpoint), taken by creating it: the JSON file, or with `folder`
  the videos' folder as well. Never one that exists."""
  folder_path = layout.evaluations_dir(run_dir)
  os.makedirs(folder_path, exist_ok=True)
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime(
      '%Y%m%dT%H%M%SZ')
  stem = os.path.join(folder_path, f'{stamp}-{os.path.basename(checkpoint)}')
  for attempt in range(1000):
    name = stem + (f'-{attempt}' if attempt else '')
    try:
      with open(name + '.json', 'x'):  # Exclusive: an existing name is skipped.
        pass
    except FileExistsError:
      continue
    if folder:
      os.mkdir(name)
    return name
  raise errors.LaunchError(f'no free file name for {stem}')


def filmed_count(prepared: Prepared, request: Request) -> int:
  """How many episodes --video films: the first --video_episodes, or all."""
  return min(request.video_episodes or len(prepared.seeds),
             len(prepared.seeds))


def filming(prepared: Prepared, request: Request, stem: str,
            echo: Callable[[str], None]) -> Optional[Callable]:
  """make_environment(seed, index) for `play` that films the first
  `video_episodes` episodes into STEM/episode_J.mp4; None (and a line
  saying why) when nothing can be filmed here."""
  from acme_launch.envs import video
  if video.choose_gl() is None:
    echo(f'video: {video.NO_GL}')
    return None
  config = prepared.run.config
  backend = config.get('env_backend', 'gym')
  count = filmed_count(prepared, request)
  if backend == 'envpool':
    echo(f'video: EnvPool does not render; the {count} filmed episodes play '
         f'the same task on the gym backend (its own start states for the '
         'same seeds), the others on EnvPool')
  make = _environment_maker(config)
  failed = []  # Said once: the first episode that cannot be filmed.

  def make_environment(seed: int, index: int):
    if index >= count or failed:
      return make(seed=seed, evaluation=True)
    environment = make(seed=seed, evaluation=True, backend='gym')
    frame = video.frame_source(environment)
    try:
      if frame is None:
        raise ValueError(f'{config.env_name} gives no frames to film')
      frame()
    except Exception as e:  # The GL context, the renderer: one line.
      failed.append(index)
      echo(f'video: no video: {type(e).__name__}: '
           f'{" ".join(str(e).split())[:200]} (Debian packages for '
           f'off-screen OpenGL: {video.DEBIAN_PACKAGES})')
      return environment
    return video.filmed(environment, frame,
                        os.path.join(stem, f'episode_{index}.mp4'),
                        video.frames_per_second(environment))

  return make_environment


def evaluate(request: Request, echo: Callable[[str], None] = print
             ) -> Dict[str, Any]:
  """Plays the episodes, prints a line each and the summary, writes them
  under RUN_DIR/evaluations/; returns what it wrote (with its `path`)."""
  prepared = prepare(request)
  config = prepared.run.config
  echo(f'acme-launch evaluate: {config.agent} on {config.env_name}, '
       f'{len(prepared.seeds)} episodes, learner checkpoint '
       f'{prepared.restored.checkpoint}')
  stem = new_stem(request.run_dir, prepared.restored.checkpoint, request.video)
  started = time.time()
  try:
    make_environment = (filming(prepared, request, stem, echo)
                        if request.video else None)
    played = play(prepared, make_environment,
                  filmed_count(prepared, request))
  except BaseException:
    _remove_empty(stem)
    raise
  videos = sorted(os.path.join(stem, n) for n in os.listdir(stem)) if (
      os.path.isdir(stem)) else []
  if request.video and not videos:  # Nothing filmed: no empty folder.
    os.rmdir(stem)
  result = {
      'run_dir': os.path.abspath(request.run_dir),
      'checkpoint': prepared.restored.checkpoint,
      'learner_steps': prepared.restored.learner_steps,
      'agent': config.agent, 'env_name': config.env_name,
      'env_backend': config.get('env_backend', 'gym'),
      'policy': 'sampling' if request.sample else 'deterministic',
      'seeds': list(map(int, prepared.seeds)),
      'final_eval_seeds': request.seed is None,
      **figures(played['returns'], played['lengths']),
      'videos': videos,
      'seconds': round(time.time() - started, 2),
  }
  for line in episode_lines(result):
    echo(line)
  echo(summary_text(result))
  for path in videos:
    echo(f'video              {path}')
  layout.write_json_atomic(stem + '.json', result)
  result['path'] = stem + '.json'
  echo(f'written to {result["path"]}')
  return result


def _remove_empty(stem: str) -> None:
  """An evaluation that did not end leaves no empty name behind."""
  for path, remove in ((stem, os.rmdir), (stem + '.json', os.remove)):
    try:
      if os.path.isdir(path) or os.path.getsize(path) == 0:
        remove(path)
    except OSError:
      pass
