"""Using a run, measured: evaluate's speed against EnvPool alone, the cost
of a 480 x 480 frame, and the memory of evaluate, export and a long filmed
Atari episode.

    python bench/evaluate.py --out=/tmp/bench_evaluate

prints, in one run, side by side:

- evaluate: `python -m acme_launch.evaluate RUN_DIR --episodes=N` on a
  `ppo_mujoco` run (HalfCheetah-v4 on EnvPool, 1,000-step episodes; a
  learner checkpoint of its shipped networks, made here), the seconds it
  played (its own figure: its pools made, reset and stepped) with the
  final evaluation's seeds (the default: consecutive, as the run drew
  them, one EnvPool of N; use/episodes.py), against EnvPool alone playing
  the same N x 1,000 steps in this process (the same seeds, and the
  actions the policy sent, recorded from a play of those episodes here),
  one EnvPool of N environments, made, reset and stepped (its ceiling;
  the stepping alone printed too): --rounds pairs in alternating order,
  each round's ratio and their median (goal: evaluate at most 1.5x); and,
  once, against N EnvPools of one stepped in turn with random actions.
  Then the same episodes and those of `--seed=1` (consecutive seeds: one
  EnvPool of N) played in this process, in wall and CPU seconds (this
  process's, its threads included) as EnvPool alone is, with random
  actions (on a machine other jobs load, wall times swing 2x from minute
  to minute; CPU time much less), and the
  default's episodes as the evaluator node plays them, an EnvPool each.
- render: milliseconds a 480 x 480 HalfCheetah-v4 frame takes to render
  off-screen (gym 0.25 + mujoco, EGL or OSMesa) as filming draws it
  (envs/video.py FILMED: no multisampling, shadows or reflections) and,
  side by side (a frame of each in turn, the same scene), with MuJoCo's
  own look (TASKS_OWN: what the task's own render draws), the median over
  --frames frames and the ratio; and to encode (libx264, imageio-ffmpeg)
  (goal: at most 10 ms to render).
- memory: the peak resident memory (ru_maxrss from wait4) of an evaluate
  process and of an export process (goal: under 2 GiB each).
- video: `evaluate --video` of one Atari episode (--atari, cut at
  --atari_steps agent steps) with the evaluate process's and its ffmpeg's
  resident memory sampled every 0.2 s while the episode is filmed (its
  mp4 exists): the first and last quarter's medians and the highest, so
  growth over the episode shows (goal: flat, under 2 GiB).

Each figure is written to OUT/evaluate.json as well.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from acme_launch.envs import video

video.choose_gl()  # Before MuJoCo is imported (the render cells).

from acme_launch.testing import checkpointed  # noqa: E402

GIB = 1 << 30


def _env():
  env = dict(os.environ)
  env.setdefault('JAX_PLATFORMS', 'cpu')
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  return env


def _resident_kib(pid: int) -> int:
  """VmRSS of `pid` and of its children (ffmpeg), in KiB; 0 once gone."""
  total = 0
  pids = [pid]
  try:
    with open(f'/proc/{pid}/task/{pid}/children') as f:
      pids += [int(p) for p in f.read().split()]
  except OSError:
    return 0
  for one in pids:
    try:
      with open(f'/proc/{one}/status') as f:
        for line in f:
          if line.startswith('VmRSS:'):
            total += int(line.split()[1])
    except OSError:
      continue
  return total


def run_measured(argv, sample_seconds: float = 0.0, sample_while=None):
  """(wall seconds, peak RSS MiB of the process itself (wait4's
  ru_maxrss), RSS samples in MiB of it and its children taken while
  `sample_while()` holds, stdout) of `python argv`."""
  with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile('w+') as err:
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, *argv], stdout=out,
                               stderr=err, text=True, env=_env())
    samples = []
    while True:  # wait4, not poll: its rusage is this child's alone.
      pid, status, usage = os.wait4(process.pid,
                                    os.WNOHANG if sample_seconds else 0)
      if pid:
        break
      kib = _resident_kib(process.pid)
      if kib and (sample_while is None or sample_while()):
        samples.append(kib / 1024)
      time.sleep(sample_seconds)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    out.seek(0)
    err.seek(0)
    if process.returncode != 0:
      sys.exit(f'bench/evaluate.py: {" ".join(argv[:3])} failed '
               f'({process.returncode}): {err.read()[-2000:]}')
    return wall, usage.ru_maxrss / 1024, samples, out.read()


def written(out: str) -> dict:
  """The evaluation JSON whose path evaluate printed last."""
  path = [l for l in out.splitlines() if l.startswith('written to ')][-1]
  with open(path[len('written to '):]) as f:
    return json.load(f)


def envpool_alone(episodes: int, steps: int, apart: bool = True,
                  played=None) -> dict:
  """Seconds (wall and this process's CPU, its threads included) EnvPool
  needs to play `episodes` HalfCheetah-v4 environments for `steps` steps
  each: one pool of them all, made, reset and stepped, as evaluate's own
  seconds count its pools' making and resets (and the steps alone); and,
  with `apart`, one pool per environment stepped in turn. The actions:
  `played` (policy_actions': the same steps evaluate plays, from the same
  seeds), else uniform random ones (fixed, drawn beforehand)."""
  import envpool
  if played is None:
    seed, actions = 0, np.random.default_rng(0).uniform(
        -1, 1, (steps, episodes, 6)).astype(np.float32)
  else:
    seed, actions = played
  kwargs = {} if played is None else {'max_episode_steps': steps}
  started, cpu = time.perf_counter(), time.process_time()
  pool = envpool.make_dm('HalfCheetah-v4', num_envs=episodes, seed=seed,
                         **kwargs)
  pool.reset()
  stepping, stepping_cpu = time.perf_counter(), time.process_time()
  for step in range(steps):
    pool.step(actions[step])
  ended, ended_cpu = time.perf_counter(), time.process_time()
  together, together_cpu = ended - started, ended_cpu - cpu
  steps_only = ended - stepping
  steps_only_cpu = ended_cpu - stepping_cpu
  pool.close()
  figures = {'one_pool_seconds': together, 'one_pool_cpu_seconds': together_cpu,
             'one_pool_steps_seconds': steps_only,
             'one_pool_steps_cpu_seconds': steps_only_cpu}
  if not apart:
    return figures
  pools = [envpool.make_dm('HalfCheetah-v4', num_envs=1, seed=i)
           for i in range(episodes)]
  for p in pools:
    p.reset()
  started = time.perf_counter()
  for step in range(steps):
    for i, p in enumerate(pools):
      p.step(actions[step, i:i + 1])
  figures['pool_per_env_seconds'] = time.perf_counter() - started
  return figures


def render_cost(frames: int, folder: str) -> dict:
  """Milliseconds a 480 x 480 HalfCheetah-v4 frame takes to render as
  filming draws it (video.FILMED) and with MuJoCo's own look (TASKS_OWN,
  how the task renders itself), side by side: two
  environments of the same seed and actions, one frame of each in turn,
  so the machine's load weighs on both alike. Then the filmed frames'
  encoding."""
  from acme_launch import envs as environments
  looks = {'filmed': video.FILMED, 'tasks_own': video.TASKS_OWN}
  made = {name: environments.make_environment('HalfCheetah-v4', 0,
                                              evaluation=True)
          for name in looks}
  sources, seconds = {}, {name: [] for name in looks}
  for name, environment in made.items():
    environment.reset()
    sources[name] = video.frame_source(environment, 480, looks[name])
    sources[name]()  # The GL context and renderer made.
  first = sources['filmed']()
  environment = made['filmed']
  actions = np.random.default_rng(0).uniform(
      -1, 1, (frames,) + environment.action_spec().shape).astype(np.float32)
  images = []
  for action in actions:
    for name, environment in made.items():
      environment.step(action)
      started = time.perf_counter()
      image = sources[name]()
      seconds[name].append(time.perf_counter() - started)
      if name == 'filmed':
        images.append(image)
  clip = video.Mp4(os.path.join(folder, 'render.mp4'), 20)
  clip.add(first)
  started = time.perf_counter()
  for image in images:
    clip.add(image)
  clip.close()
  encode = (time.perf_counter() - started) / frames
  for environment in made.values():
    environment.close()
  ms = {name: 1e3 * statistics.median(s) for name, s in seconds.items()}
  return {'frames': frames, 'shape': list(first.shape),
          'gl': os.environ.get('MUJOCO_GL'),
          'render_ms': ms['filmed'],
          'render_mean_ms': 1e3 * statistics.mean(seconds['filmed']),
          'tasks_own_render_ms': ms['tasks_own'],
          'tasks_own_render_mean_ms': 1e3 * statistics.mean(
              seconds['tasks_own']),
          'ratio': ms['tasks_own'] / ms['filmed'],
          'encode_ms': encode * 1e3,
          'load_average': list(os.getloadavg())}


def played_in_process(run_dir: str, args, seed, as_evaluator=False) -> dict:
  """Seconds (wall and this process's CPU) `evaluate RUN_DIR --episodes=N`
  (`seed` None: the final evaluation's seeds; else --seed) plays its
  episodes, as the Python API plays them: the window of evaluate's own
  `seconds`. CPU time is the figure other jobs on the machine move least.
  `as_evaluator`: played as the evaluator node plays them, an EnvPool per
  episode (use/evaluate.py's `play_as_evaluator`, how evaluate played
  them before use/episodes.py)."""
  from acme_launch.use import evaluate
  from acme_launch.use import restore
  config = restore.read_run(run_dir).config
  config.env_max_episode_steps = args.episode_steps
  prepared = evaluate.prepare(evaluate.Request(
      run_dir, episodes=args.episodes, seed=seed, config=config))
  started, cpu = time.perf_counter(), time.process_time()
  played = (evaluate.play_as_evaluator if as_evaluator else evaluate.play)(
      prepared)
  return {'seconds': time.perf_counter() - started,
          'cpu_seconds': time.process_time() - cpu,
          'steps': int(sum(played['lengths']))}


def policy_actions(run_dir: str, args):
  """(the pool's seed, every action sent to it, steps x episodes x 6) of
  evaluate's episodes with the final evaluation's seeds (one EnvPool of
  consecutive seeds), played in this process, for EnvPool alone to step
  the same steps."""
  from acme_launch import envs as environments
  from acme_launch.use import evaluate
  from acme_launch.use import restore
  config = restore.read_run(run_dir).config
  config.env_max_episode_steps = args.episode_steps
  prepared = evaluate.prepare(evaluate.Request(
      run_dir, episodes=args.episodes, config=config))
  seeds = prepared.seeds
  assert seeds == list(range(seeds[0], seeds[0] + len(seeds))), seeds
  sent = []
  send = environments.EnvPoolEnvironments.send

  def recorded(pool, actions, env_id):
    sent.append(np.array(pool._scale(actions), np.float32))  # pylint: disable=protected-access
    return send(pool, actions, env_id)

  environments.EnvPoolEnvironments.send = recorded
  try:
    evaluate.play(prepared)
  finally:
    environments.EnvPoolEnvironments.send = send
  return seeds[0], np.stack(sent)


def evaluate_rounds(ppo_run: str, args, played) -> dict:
  """`--rounds` pairs, in alternating order (evaluate first in odd rounds):
  the evaluate process's played seconds, and EnvPool alone in one pool;
  each round's ratio, and their median (the figure to read: runs on a
  shared machine move by 20% or more from one to the next)."""
  cut = f'--config.env_max_episode_steps={args.episode_steps}'
  rounds = []
  for index in range(args.rounds):
    figures = {}
    for part in (('evaluate', 'alone') if index % 2 == 0 else
                 ('alone', 'evaluate')):
      if part == 'evaluate':
        wall, peak, _, out = run_measured(
            ['-m', 'acme_launch.evaluate', ppo_run,
             f'--episodes={args.episodes}', cut])
        evaluated = written(out)
        figures.update(steps=int(sum(evaluated['lengths'])),
                       played_seconds=evaluated['seconds'],
                       process_seconds=wall, peak_rss_mib=peak)
      else:
        figures.update(envpool_alone(args.episodes, args.episode_steps,
                                     apart=False, played=played))
    figures['ratio_one_pool'] = (figures['played_seconds'] /
                                 figures['one_pool_seconds'])
    rounds.append(figures)
  return {'rounds': rounds,
          **{f'{name}_median': statistics.median(r[name] for r in rounds)
             for name in ('played_seconds', 'one_pool_seconds',
                          'one_pool_steps_seconds', 'ratio_one_pool')},
          'peak_rss_mib': max(r['peak_rss_mib'] for r in rounds)}


def evaluate_and_export(args, work: str) -> dict:
  ppo = checkpointed.load_config('ppo_mujoco')
  ppo_run = checkpointed.make_run_dir(os.path.join(work, 'ppo'), ppo)
  measured = evaluate_rounds(ppo_run, args, policy_actions(ppo_run, args))
  final = played_in_process(ppo_run, args, None)
  seeded = played_in_process(ppo_run, args, 1)
  evaluator_way = played_in_process(ppo_run, args, None, as_evaluator=True)
  alone = envpool_alone(args.episodes, args.episode_steps)
  export_wall, export_peak, _, _ = run_measured(
      ['-m', 'acme_launch.export', ppo_run, os.path.join(work, 'policy')])
  return {'evaluate': {
      'episodes': args.episodes, 'steps': measured['rounds'][0]['steps'],
      **measured,
      'in_process': {'final_eval_seeds': final, 'seed_1': seeded,
                     'as_evaluator': evaluator_way, 'envpool_alone': alone},
      'ratio_pool_per_env': (measured['played_seconds_median'] /
                             alone['pool_per_env_seconds']),
      'evaluator_cpu_ratio_one_pool': (evaluator_way['cpu_seconds'] /
                                       alone['one_pool_cpu_seconds']),
      'seeded_ratio_one_pool': (seeded['seconds'] /
                                alone['one_pool_seconds']),
      'cpu_ratio_one_pool': (final['cpu_seconds'] /
                             alone['one_pool_cpu_seconds']),
      'seeded_cpu_ratio_one_pool': (seeded['cpu_seconds'] /
                                    alone['one_pool_cpu_seconds'])},
          'export': {'seconds': export_wall, 'peak_rss_mib': export_peak}}


def filmed_memory(args, work: str) -> dict:
  atari = checkpointed.load_config('dqn_atari', {'env_name': args.atari})
  atari_run = checkpointed.make_run_dir(os.path.join(work, 'atari'), atari)
  wall, _, samples, out = run_measured(
      ['-m', 'acme_launch.evaluate', atari_run, '--episodes=1', '--video',
       f'--config.env_max_episode_steps={args.atari_steps}'],
      sample_seconds=0.2, sample_while=lambda: glob.glob(os.path.join(
          atari_run, 'evaluations', '*', 'episode_0.mp4')))
  filmed = written(out)
  quarter = max(1, len(samples) // 4)
  return {
      'task': args.atari, 'steps': int(filmed['lengths'][0]),
      'seconds': wall, 'samples': len(samples),
      'first_quarter_rss_mib': statistics.median(samples[:quarter]),
      'last_quarter_rss_mib': statistics.median(samples[-quarter:]),
      'peak_rss_mib': max(samples),
      'video_bytes': sum(os.path.getsize(p) for p in filmed['videos'])}


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--out', required=True)
  parser.add_argument('--episodes', type=int, default=100)
  parser.add_argument('--episode_steps', type=int, default=1000,
                      help='HalfCheetah-v4 episodes cut here (its own: 1,000)')
  parser.add_argument('--rounds', type=int, default=5,
                      help='evaluate and EnvPool alone, in alternating order')
  parser.add_argument('--frames', type=int, default=100)
  parser.add_argument('--atari', default='atari:Breakout')
  parser.add_argument('--atari_steps', type=int, default=6000)
  parser.add_argument('--parts', default='evaluate,render,video',
                      help='evaluate (with export), render, video')
  args = parser.parse_args(argv)
  if args.rounds < 1:
    parser.exit(2, f'bench/evaluate.py: error: --rounds must be at least 1, '
                f'not {args.rounds}\n')
  os.makedirs(args.out, exist_ok=True)
  work = tempfile.mkdtemp(prefix='bench-evaluate-', dir=args.out)
  results = {'argv': argv}

  parts = args.parts.split(',')
  if 'evaluate' in parts:
    results.update(evaluate_and_export(args, work))
    e, x = results['evaluate'], results['export']
    for index, r in enumerate(e['rounds']):
      print(f'evaluate  round {index + 1}: {e["episodes"]} episodes, '
            f'{r["steps"]} steps, the final evaluation\'s seeds: played in '
            f'{r["played_seconds"]:.1f} s ({r["process_seconds"]:.1f} s with '
            f'its start); EnvPool alone {r["one_pool_seconds"]:.1f} s in one '
            f'pool made, reset and stepped ({r["one_pool_steps_seconds"]:.1f}'
            f' s the steps alone): {r["ratio_one_pool"]:.2f}x', flush=True)
    print(f'evaluate  median of {len(e["rounds"])} round(s): '
          f'{e["ratio_one_pool_median"]:.2f}x EnvPool alone in one pool '
          f'(goal: at most 1.5x); {e["ratio_pool_per_env"]:.2f}x EnvPool '
          f'alone in a pool per episode '
          f'({e["in_process"]["envpool_alone"]["pool_per_env_seconds"]:.1f} s)')
    final, seeded = (e['in_process'][k] for k in ('final_eval_seeds',
                                                    'seed_1'))
    print(f'evaluate  in this process: the final evaluation\'s seeds '
          f'{final["seconds"]:.1f} s ({final["cpu_seconds"]:.1f} s CPU), '
          f'--seed=1 (one pool) {seeded["seconds"]:.1f} s '
          f'({seeded["cpu_seconds"]:.1f} s CPU); EnvPool alone in one pool '
          f'{e["in_process"]["envpool_alone"]["one_pool_cpu_seconds"]:.1f} '
          's CPU: '
          f'{e["cpu_ratio_one_pool"]:.2f}x and '
          f'{e["seeded_cpu_ratio_one_pool"]:.2f}x its CPU time, '
          f'{e["seeded_ratio_one_pool"]:.2f}x its wall time with --seed=1')
    way = e['in_process']['as_evaluator']
    print(f'evaluate  as the evaluator plays them (an EnvPool per episode): '
          f'{way["seconds"]:.1f} s ({way["cpu_seconds"]:.1f} s CPU): '
          f'{e["evaluator_cpu_ratio_one_pool"]:.2f}x EnvPool alone\'s CPU '
          'time')
    print(f'memory    evaluate peak {e["peak_rss_mib"]:.0f} MiB, export peak '
          f'{x["peak_rss_mib"]:.0f} MiB (goal: under {2 * GIB >> 20} MiB)')
  if 'render' in parts:
    results['render'] = r = render_cost(args.frames, work)
    print(f'render    {r["shape"][1]} x {r["shape"][0]} HalfCheetah-v4 frame '
          f'({r["gl"]}), median of {r["frames"]} frames: '
          f'{r["render_ms"]:.1f} ms to render as filmed (mean '
          f'{r["render_mean_ms"]:.1f}), {r["tasks_own_render_ms"]:.1f} ms '
          f'with MuJoCo\'s own look (mean {r["tasks_own_render_mean_ms"]:.1f}'
          f'; {r["ratio"]:.1f}x), {r["encode_ms"]:.1f} ms to encode; load '
          f'average {r["load_average"][0]:.1f} (goal: at most 10 ms)')
  if 'video' in parts:
    results['video'] = v = filmed_memory(args, work)
    print(f'video     {v["task"]}, one episode of {v["steps"]} steps filmed '
          f'in {v["seconds"]:.1f} s: evaluate + ffmpeg resident '
          f'{v["first_quarter_rss_mib"]:.0f} MiB in its first quarter, '
          f'{v["last_quarter_rss_mib"]:.0f} MiB in its last, highest '
          f'{v["peak_rss_mib"]:.0f} MiB ({v["samples"]} samples while it '
          f'filmed; goal: flat, under {2 * GIB >> 20} MiB)')
  with open(os.path.join(args.out, 'evaluate.json'), 'w') as f:
    json.dump(results, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
