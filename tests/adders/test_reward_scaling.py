"""PPO's reward normalization (`ppo.normalize_rewards`).

The scaler's arithmetic is checked against numpy over the whole history of
returns; both PPO writers (the batched one and Acme's own, wrapped) are fed
real Hopper-v4 steps and must put in Reverb exactly the items an unscaled
writer puts there when handed the scaler's rewards. A real PPO launch with
it on: tests/e2e/adders/test_reward_scaling.py.
"""

import numpy as np
import pytest
import reverb

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme_launch.adders import batched as batched_adders
from acme_launch import envs as environments
from acme_launch.adders import reward_scaling
from tests.adders import test_batched as test_batched_adders


NUM_ENVS = 3
NUM_STEPS = 300
DISCOUNT = 0.99


def test_scale_is_the_running_std_of_discounted_returns():
  rng = np.random.default_rng(0)
  scaler = reward_scaling.ReturnScaler(NUM_ENVS, DISCOUNT, clip=np.inf)
  returns = np.zeros(NUM_ENVS)
  history = []
  for step in range(NUM_STEPS):
    # Some steps only some envs step (EnvPool resetting the others).
    index = np.flatnonzero(rng.random(NUM_ENVS) < 0.8)
    rewards = rng.normal(3.0, 2.0, index.size)
    lasts = rng.random(index.size) < 0.05
    scaled = scaler.scale(index, rewards, lasts)
    returns[index] = returns[index] * DISCOUNT + rewards
    history.extend(returns[index])
    returns[index[lasts]] = 0.0
    if step > 10 and index.size:
      np.testing.assert_allclose(scaled, rewards / np.std(history), rtol=1e-3)
  assert scaler.std > 10  # Returns of rewards near 3 grow well past 1.


def test_scaled_rewards_are_clipped():
  scaler = reward_scaling.ReturnScaler(1, DISCOUNT, clip=10.0)
  for _ in range(100):
    scaler.scale(np.array([0]), [0.01], [False])
  assert scaler.scale(np.array([0]), [1e6], [False])[0] == 10.0


def _hopper_steps(envs, spec, on_step):
  """Random-action Hopper steps, each handed to on_step(actions, steps)."""
  rng = np.random.default_rng(1)
  timesteps = [env.reset() for env in envs]
  on_step(None, timesteps)
  for _ in range(NUM_STEPS):
    actions = rng.uniform(spec.actions.minimum, spec.actions.maximum,
                          (len(envs),) + spec.actions.shape).astype(np.float32)
    timesteps = [env.step(a) for env, a in zip(envs, actions)]
    on_step(actions, timesteps)
    for i, timestep in enumerate(timesteps):
      if timestep.last():
        timesteps[i] = envs[i].reset()
        on_step(None, {i: timesteps[i]})


@pytest.fixture(name='hopper')
def _hopper():
  envs = [environments.make_environment('Hopper-v4', seed=s)
          for s in range(NUM_ENVS)]
  spec = specs.make_environment_spec(envs[0])
  _, builder = test_batched_adders._ppo_builder(spec)
  table = builder.make_replay_tables(spec)[0]
  servers = [reverb.Server(builder.make_replay_tables(spec)) for _ in range(2)]
  clients = [reverb.Client(f'localhost:{s.port}') for s in servers]
  yield envs, spec, builder, table, clients
  for server in servers:
    server.stop()


def _same_items(clients, table):
  read = test_batched_adders._read_all
  key = test_batched_adders._key
  scaled, reference = (sorted(read(c, table.name), key=key) for c in clients)
  assert len(scaled) > NUM_ENVS * NUM_STEPS // 8
  assert len(scaled) == len(reference)
  for a, b in zip(scaled, reference):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)


def test_batched_writer_stores_the_scaled_rewards(hopper):
  envs, _, _, table, clients = hopper
  spec = specs.make_environment_spec(envs[0])
  scaled = batched_adders.BatchedSequenceAdder(
      clients[0], table.name, table.info.signature, NUM_ENVS,
      reward_scaler=reward_scaling.ReturnScaler(NUM_ENVS, DISCOUNT))
  reference = batched_adders.BatchedSequenceAdder(
      clients[1], table.name, table.info.signature, NUM_ENVS)
  twin = reward_scaling.ReturnScaler(NUM_ENVS, DISCOUNT)
  index = np.arange(NUM_ENVS)

  def on_step(actions, timesteps):
    if actions is None:  # First timesteps: a list, or {env: timestep}.
      items = (enumerate(timesteps) if isinstance(timesteps, list)
               else timesteps.items())
      for i, timestep in items:
        scaled.add_first(i, timestep)
        reference.add_first(i, timestep)
      return
    extras = {'log_prob': np.zeros(NUM_ENVS, np.float32)}
    scaled.add(actions, timesteps, extras)
    rewards = twin.scale(index, [t.reward for t in timesteps],
                         [t.last() for t in timesteps])
    reference.add(actions, [t._replace(reward=np.float32(r))
                            for t, r in zip(timesteps, rewards)], extras)

  _hopper_steps(envs, spec, on_step)
  scaled.close()
  reference.close()
  assert twin.std > 1.0  # The rewards really were rescaled.
  _same_items(clients, table)


def test_acme_adder_wrapped_stores_the_scaled_rewards(hopper):
  envs, spec, builder, table, clients = hopper
  envs = envs[:1]
  builder._normalize_rewards = True
  scaled = builder.make_adder(clients[0])
  assert isinstance(scaled, reward_scaling.RewardScalingAdder)
  builder._normalize_rewards = False
  reference = builder.make_adder(clients[1])
  twin = reward_scaling.ReturnScaler(1, DISCOUNT)

  def on_step(actions, timesteps):
    timestep = timesteps[0]
    if actions is None:
      scaled.add_first(timestep)
      reference.add_first(timestep)
      return
    extras = {'log_prob': np.float32(0.0)}
    scaled.add(actions[0], timestep, extras=extras)
    reward = twin.scale(np.array([0]), [timestep.reward], [timestep.last()])[0]
    reference.add(actions[0], timestep._replace(reward=np.float32(reward)),
                  extras=extras)

  _hopper_steps(envs, spec, on_step)
  scaled._adder._writer.flush()
  reference._writer.flush()
  read = test_batched_adders._read_all
  scaled_items, reference_items = (read(c, table.name) for c in clients)
  assert len(scaled_items) == len(reference_items) > NUM_STEPS // 8
  for a, b in zip(scaled_items, reference_items):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)
