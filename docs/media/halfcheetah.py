"""How docs/media/halfcheetah.gif was made (the README's clip).

    python docs/media/halfcheetah.py /tmp/clip

A `ppo_mujoco` policy trained to 1M steps (its parameters, observation
normalizer included, are tests/program/data/ppo_halfcheetah_params.npz),
played by the evaluator's own episode loop (program/evaluation.py) on
HalfCheetah-v4 (gym), 150 steps from the first of seeds 0-9 where it runs
(return over 400 in those steps), filmed by the evaluator's camera
(envs/video.py) at 240 x 240; every second frame into a looping GIF at
10 frames a second.
"""

import os
import sys

from acme_launch.envs import video

video.choose_gl()  # Before MuJoCo is imported.

from acme_launch import compat  # noqa: E402,F401  JAX aliases; before acme
from acme import core  # noqa: E402
from acme import specs  # noqa: E402
from acme.jax import variable_utils  # noqa: E402
import imageio.v3 as iio  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from acme_launch import agents  # noqa: E402
from acme_launch import envs as environments  # noqa: E402
from acme_launch import paths  # noqa: E402
from acme_launch.config import registry  # noqa: E402
from acme_launch.program import evaluation  # noqa: E402

STEPS, SIZE = 150, 240
PARAMS = os.path.join(paths.ROOT, 'tests', 'program', 'data',
                      'ppo_halfcheetah_params.npz')


class Params(core.VariableSource):

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    return [self._params for _ in names]


def trained_params():
  params = {}
  with np.load(PARAMS) as arrays:
    for key in arrays.files:
      module, name = key.rsplit('/', 1)
      params.setdefault(module, {})[name] = arrays[key]
  return params


def main(out: str) -> int:
  os.makedirs(out, exist_ok=True)
  config = registry.load('ppo_mujoco')
  adapter = agents.load('ppo')
  make = lambda seed: environments.make_environment(
      config.env_name, seed, max_episode_steps=STEPS, backend='gym',
      evaluation=True)
  spec = specs.make_environment_spec(make(0))
  policy = adapter.make_policy(config, adapter.make_networks(config, spec),
                               spec, evaluation=True)
  source = Params(trained_params())

  def play(seeds, make_first=None, film_to=''):
    return evaluation.Evaluation(
        make, seeds, policy,
        variable_utils.VariableClient(source, adapter.actor_variables),
        jax.random.PRNGKey(0), adapter.policy_returns_extras,
        make_first=make_first).run(film_to=film_to)

  returns = play(list(range(10)))['returns']
  seed = next(s for s, r in enumerate(returns) if r > 400)
  frames = []

  def camera(seed):  # The evaluator's camera, its frames kept for the GIF.
    environment = make(seed)
    render = video.frame_source(environment, SIZE)
    return video.Camera(environment, lambda: frames.append(render()) or (
        frames[-1]), video.frames_per_second(environment))

  result = play([seed], camera, os.path.join(out, 'halfcheetah.mp4'))
  gif = os.path.join(out, 'halfcheetah.gif')
  iio.imwrite(gif, np.stack(frames[::2]), extension='.gif', duration=100,
              loop=0)
  print(f'seed {seed}: return {result["returns"][0]:.0f} in {STEPS} steps; '
        f'{gif}: {len(frames[::2])} frames, {os.path.getsize(gif)} bytes')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '/tmp/clip'))
