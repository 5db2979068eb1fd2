"""SGD steps/s of an off-policy learner alone and in a run, side by side.

    .venv/bin/python bench/learner.py [--config=sac_mujoco] [--seconds=60]
        [--out=bench/out] [-- EXTRA LAUNCH FLAGS]

alone: the config's learner, built by its agent adapter as the program
builds it (same networks, optimizers, batch size, SGD steps per step), steps
on one in-memory batch of the environment's shapes (transitions; R2D2 and
IMPALA: sequences of their replay signature), with nothing else running:
what its SGD step costs on this machine (its intrinsic rate).
in a run: `launch.py --config=CONFIG EXTRA...` with every node; its learner's
steps/s (and the actors' env steps/s) from the counter totals in
metrics/progress.csv, over --seconds after the learner's first step plus a
settling time, the run then stopped. Prints both and their ratio; also
OUT/learner.json.
"""

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import List, Optional, Tuple

from acme_launch.testing.launcher import REPO_ROOT, launch_command


def _load_config(name: str, overrides: List[str]):
  """The config with its overrides, as `launch.py --dry_run` reads it."""
  from acme_launch import prepare
  return prepare.check_arguments(['launch.py', f'--config={name}', *overrides]).config


def alone(config, seconds: float, warmup: int = 20) -> Tuple[float, int]:
  """(SGD steps/s, SGD steps) of the config's learner on one in-memory
  batch, after `warmup` learner steps (the first compiles)."""
  from acme_launch import compat
  from acme import specs, types
  import jax
  import numpy as np
  import reverb
  from acme.utils import loggers
  from acme_launch import agents
  from acme_launch import envs

  spec = specs.make_environment_spec(envs.make_environment(
      config.env_name, seed=0, backend=config.env_backend, config=config))
  adapter = agents.load(config.agent)
  builder = adapter.make_builder(config, learner_logger_fn=loggers.NoOpLogger,
                                 environment_spec=spec)
  networks = adapter.make_networks(config, spec)
  # A learner step of several SGD steps (num_sgd_steps_per_step) takes one
  # batch of that many times batch_size and splits it, as in a run; both
  # sides of the comparison count SGD steps.
  sgd_steps = sgd_steps_per_learner_step(config)
  batch_size = config[adapter.section].batch_size * sgd_steps
  rng = np.random.default_rng(0)

  def batch_of(array_spec):
    shape = (batch_size, *array_spec.shape)
    return rng.uniform(-1, 1, shape).astype(array_spec.dtype)

  if config.agent in ('r2d2', 'impala'):  # Sequences, Reverb's sample info.
    sample = _sequence_sample(config.agent, builder, spec, batch_size)
  else:
    transition = types.Transition(
        observation=batch_of(spec.observations), action=batch_of(spec.actions),
        reward=batch_of(spec.rewards), discount=np.ones(
            (batch_size,), spec.discounts.dtype),
        next_observation=batch_of(spec.observations))
    # With Reverb's sample info: DQN's prioritized loss reads it.
    sample = reverb.ReplaySample(info=_uniform_info(batch_size),
                                 data=transition)

  def batches():
    while True:
      yield sample

  learner = builder.make_learner(jax.random.PRNGKey(0), networks, batches())
  for _ in range(warmup):  # Compiles, then settles.
    learner.step()
  jax.block_until_ready(learner.get_variables(['policy']))
  steps, start = 0, time.time()
  while time.time() - start < seconds:
    learner.step()
    steps += 1
  jax.block_until_ready(learner.get_variables(['policy']))
  return steps * sgd_steps / (time.time() - start), steps * sgd_steps


def _sequence_sample(agent: str, builder, spec, batch_size: int):
  """One batch of R2D2's or IMPALA's sequences (zeros: actions 0, IMPALA's
  logits uniform), shaped as its replay table's signature, with uniform
  sampling probabilities."""
  import numpy as np
  import reverb
  import tree
  from acme.adders import reverb as adders_reverb
  if agent == 'impala':  # As IMPALABuilder.make_replay_tables makes it.
    extra_spec = {'core_state': builder._core_state_spec,
                  'logits': np.zeros((spec.actions.num_values,), np.float32)}
    length = builder._config.sequence_length
  else:  # R2D2.
    extra_spec, length = builder._extra_spec, builder._sequence_length
  signature = adders_reverb.SequenceAdder.signature(spec, extra_spec, length)
  data = tree.map_structure(
      lambda s: np.zeros((batch_size, *s.shape), s.dtype.as_numpy_dtype),
      signature)
  return reverb.ReplaySample(info=_uniform_info(batch_size), data=data)


def _uniform_info(batch_size: int):
  """Reverb's sample info for a batch: keys, probabilities, ... all 1."""
  import numpy as np
  import reverb
  return reverb.SampleInfo(*[np.ones((batch_size,), dtype.as_numpy_dtype)
                             for dtype in reverb.SampleInfo.tf_dtypes()])


# Acme's SAC, TD3 and D4PG learners count one `learner_steps` a learner step,
# however many SGD steps it runs (num_sgd_steps_per_step); its DQN learner
# counts SGD steps.
_COUNTS_LEARNER_STEPS = ('sac', 'td3', 'd4pg')


def sgd_steps_per_learner_step(config) -> int:
  """The config's num_sgd_steps_per_step, in its agent's section (1 where
  it has none)."""
  from acme_launch import agents
  section = config.get(agents.load(config.agent).section, {})
  return int(section.get('num_sgd_steps_per_step', 1))


def sgd_steps_per_count(config) -> int:
  """SGD steps in one of the run's counted learner steps."""
  if config.agent not in _COUNTS_LEARNER_STEPS:
    return 1
  return sgd_steps_per_learner_step(config)


def _rows(progress_csv: str) -> List[Tuple[float, float, float]]:
  """(wall time, learner steps, actor steps) rows of the run's progress
  file."""
  if not os.path.isfile(progress_csv):
    return []
  with open(progress_csv, newline='') as f:
    return [(float(r['wall_time']), float(r['learner_steps']),
             float(r['actor_steps'])) for r in csv.DictReader(f)]


def _at(rows, when: float) -> Optional[Tuple[float, float, float]]:
  later = [r for r in rows if r[0] >= when]
  return later[0] if later else None


def in_a_run(config_name: str, extra: List[str], seconds: float,
             settle: float, workdir: str, timeout: float,
             sgd_per_count: int = 1) -> Tuple[float, int, float]:
  """(SGD steps/s, SGD steps, actor env steps/s) of the learner of a whole
  run of the config, over the same window; `sgd_per_count`: SGD steps in
  one counted learner step."""
  shutil.rmtree(workdir, ignore_errors=True)
  progress_csv = os.path.join(workdir, 'run', 'metrics', 'progress.csv')
  launcher = subprocess.Popen(
      launch_command(f'--config={config_name}', f'--workdir={workdir}',
                     '--run_name=run', '--progress_every=1000', *extra),
      cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  started, first = time.time(), None
  try:
    while time.time() - started < timeout and launcher.poll() is None:
      time.sleep(1.0)
      rows = _rows(progress_csv)
      stepping = [r for r in rows if r[1] > 0]
      if first is None and stepping:
        first = stepping[0][0]
      if first is not None and rows[-1][0] >= first + settle + seconds:
        break
  finally:
    launcher.send_signal(signal.SIGINT)
    launcher.wait(timeout=120)
  rows = _rows(progress_csv)
  begin, end = (_at(rows, first + settle), rows[-1]) if first else (None, None)
  if not begin or end[0] <= begin[0]:
    raise SystemExit('bench/learner.py: the run\'s learner did not step for '
                     f'--seconds={seconds:g} within --timeout={timeout:g}; '
                     f'see {workdir}/run/logs')
  steps = (end[1] - begin[1]) * sgd_per_count
  seconds = end[0] - begin[0]
  return steps / seconds, int(steps), (end[2] - begin[2]) / seconds


def main(argv: List[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config', default='sac_mujoco')
  parser.add_argument('--seconds', type=float, default=60.0,
                      help='measured seconds, alone and in the run')
  parser.add_argument('--settle', type=float, default=20.0,
                      help='seconds after the run\'s first learner step '
                      'before measuring')
  parser.add_argument('--timeout', type=float, default=900.0)
  parser.add_argument('--alone_only', action='store_true',
                      help='measure the learner alone, start no run')
  parser.add_argument('--out', default=os.path.join(REPO_ROOT, 'bench', 'out'))
  parser.add_argument('extra', nargs='*', help='launch flags after --')
  args = parser.parse_args(argv)
  from acme_launch import quiet
  quiet.quiet_third_party()
  if args.seconds <= 0 or args.settle < 0:
    parser.error('--seconds must be positive and --settle not negative')
  config = _load_config(args.config, args.extra)
  rate_alone, steps_alone = alone(config, args.seconds)
  import jax
  device = jax.devices()[0].device_kind
  print(f'config {args.config} {" ".join(args.extra)}'.rstrip() +
        f' on {os.cpu_count()} cores, JAX on {device}: {config.agent} learner, '
        'SGD steps/s')
  print(f'  alone, in-memory batches   {rate_alone:8.2f}  ({steps_alone} steps)')
  result = {'config': args.config, 'extra': args.extra,
            'cores': os.cpu_count(), 'jax_device': device, 'agent': config.agent,
            'alone_sgd_steps_per_second': rate_alone,
            'alone_sgd_steps': steps_alone,
            'sgd_steps_per_learner_step': sgd_steps_per_learner_step(config)}
  os.makedirs(args.out, exist_ok=True)
  if args.alone_only:
    with open(os.path.join(args.out, 'learner.json'), 'w') as f:
      json.dump(result, f, indent=1)
    return 0
  rate_run, steps_run, actor_rate = in_a_run(
      args.config, args.extra, args.seconds, args.settle,
      os.path.join(args.out, 'learner'), args.timeout,
      sgd_steps_per_count(config))
  print(f'  in a run of the config     {rate_run:8.1f}  ({steps_run} steps)')
  print(f'  in a run / alone           {rate_run / rate_alone:8.0%}')
  print(f'  actors in the run, env steps/s {actor_rate:8.1f}')
  result.update(run_sgd_steps_per_second=rate_run, ratio=rate_run / rate_alone,
                run_sgd_steps=steps_run, run_actor_steps_per_second=actor_rate)
  with open(os.path.join(args.out, 'learner.json'), 'w') as f:
    json.dump(result, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
