"""Acme's JAX PPO (dm-acme 0.4.0) from a `config.ppo` section."""

from typing import Callable, Iterator, List, Optional

from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme import specs
from acme.adders import reverb as adders_reverb
from acme.agents.jax import ppo
from acme.jax import networks as networks_lib
from acme.jax import utils
from acme.utils import loggers
import haiku as hk
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import reverb

from acme_launch.adders import batched as batched_adders
from acme_launch import errors
from acme_launch.adders import reward_scaling

# Devices its learner uses: dm-acme 0.4.0's learning.py has no pmap, so one
# (the resource planner gives the learner this many GPUs, no more).
LEARNER_DEVICES = 1

# The actor path (agents/__init__.py): its actors fetch the learner's
# 'network' variables, its policy returns (actions, extras) (the log-probs
# its learner needs; {} when evaluating), and a batched actor writes every
# environment's sequences through the builder's make_batched_adder.
ACTOR_VARIABLES = 'network'
POLICY_RETURNS_EXTRAS = True
BATCHED_ADDER = True


class BoundedQueuePPOBuilder(ppo.PPOBuilder):
  """PPOBuilder whose replay queue holds at most `max_queue_size` sequences.

  Acme sizes the queue `batch_size + 1000` for its single-process layout.
  Distributed, that lets actors run up to 1000 sequences ahead of a slow
  learner (stale, off-policy data) and lets a short run end before the
  learner took a step. A bounded queue makes actors wait for the learner.
  """

  def __init__(self, config: ppo.PPOConfig, max_queue_size: int,
               normalize_observations: bool = False,
               normalize_rewards: bool = False,
               final_observation_rows: bool = True, **kwargs):
    super().__init__(config, **kwargs)
    self._max_queue_size = max_queue_size
    self._normalize_observations = normalize_observations
    self._normalize_rewards = normalize_rewards
    self._final_observation_rows = final_observation_rows

  def _reward_scaler(self, num_envs: int):
    """Each actor's own scaler (`ppo.normalize_rewards`), or None."""
    if not self._normalize_rewards:
      return None
    return reward_scaling.ReturnScaler(num_envs, self._config.discount)

  def make_adder(self, replay_client: reverb.Client):
    adder = super().make_adder(replay_client)
    scaler = self._reward_scaler(1)
    return adder if scaler is None else reward_scaling.RewardScalingAdder(
        adder, scaler)

  def make_learner(self, random_key, networks, dataset, replay_client=None,
                   counter=None) -> core.Learner:
    if not self._normalize_observations:
      return super().make_learner(random_key, networks, dataset,
                                  replay_client, counter)
    tap = ObservationTap(dataset)
    return ObservationStatsLearner(
        super().make_learner(random_key, networks, tap, replay_client, counter),
        tap)

  def replay_signature(self, environment_spec: specs.EnvironmentSpec):
    return adders_reverb.SequenceAdder.signature(
        environment_spec, {'log_prob': np.ones((), np.float32)},
        sequence_length=self._sequence_length)

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec):
    return [reverb.Table.queue(name=self._config.replay_table_name,
                               max_size=self._max_queue_size,
                               signature=self.replay_signature(environment_spec))]

  def make_batched_adder(self, replay_client: reverb.Client,
                         environment_spec: specs.EnvironmentSpec,
                         num_envs: int) -> batched_adders.BatchedSequenceAdder:
    """The same sequences `make_adder` writes, for N envs in one writer."""
    return batched_adders.BatchedSequenceAdder(
        replay_client, self._config.replay_table_name,
        self.replay_signature(environment_spec), num_envs,
        reward_scaler=self._reward_scaler(num_envs),
        final_rows=self._final_observation_rows)


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> ppo.PPOBuilder:
  del environment_spec  # PPO's config needs nothing from it.
  agent_fields, ours = split_fields(config)
  if not ours['final_observation_rows'] and config.envs_per_actor == 1:
    raise errors.LaunchError(
        'config.ppo.final_observation_rows=False needs the batched actor: '
        'set config.envs_per_actor to 2 or more')
  ppo_config = ppo.PPOConfig(**agent_fields)
  return BoundedQueuePPOBuilder(
      ppo_config,
      max_queue_size=ours['max_queue_batches'] * ppo_config.batch_size + 2,
      normalize_observations=_normalizes(config),
      normalize_rewards=ours['normalize_rewards'],
      final_observation_rows=ours['final_observation_rows'],
      logger_fn=learner_logger_fn)


# Fields of `config.ppo` that are acme-launch's, not dm-acme's PPOConfig's,
# with their defaults where a config leaves them out.
OUR_FIELDS = {'max_queue_batches': None, 'anneal_learning_rate': False,
              'normalize_rewards': False, 'final_observation_rows': True}


def split_fields(config: ml_collections.ConfigDict):
  """`config.ppo` as (PPOConfig keyword arguments, acme-launch's fields);
  an annealed learning rate is already the schedule in the first."""
  agent_fields = config.ppo.to_dict()
  ours = {name: agent_fields.pop(name, default)
          for name, default in OUR_FIELDS.items()}
  if ours['anneal_learning_rate']:
    agent_fields['learning_rate'] = annealed_learning_rate(config)
  return agent_fields, ours


def _normalizes(config: ml_collections.ConfigDict) -> bool:
  return bool(config.network.get('normalize_observations', False))


def annealed_learning_rate(config: ml_collections.ConfigDict) -> optax.Schedule:
  """`ppo.learning_rate` falling linearly to 0 at `max_actor_steps`.

  Acme counts the schedule in optimizer updates: each learner step takes
  batch_size x unroll_length env steps and makes num_epochs x num_minibatches
  updates. A resumed run with a larger budget continues from the restored
  update count on the new, longer schedule.
  """
  env_steps_per_learner_step = config.ppo.batch_size * config.ppo.unroll_length
  learner_steps = -(-config.max_actor_steps // env_steps_per_learner_step)
  updates = learner_steps * config.ppo.num_epochs * config.ppo.num_minibatches
  if updates >= 2**31:  # optax counts in int32: the learner would overflow.
    raise errors.LaunchError(
        f'config.max_actor_steps={config.max_actor_steps:,} makes '
        f'{updates:,} optimizer updates, more than the annealed learning '
        'rate can count (2**31); lower it or set '
        'config.ppo.anneal_learning_rate=False')
  return optax.linear_schedule(config.ppo.learning_rate, 0.0, max(updates, 1))


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> ppo.PPONetworks:
  if _normalizes(config):
    return make_normalized_networks(environment_spec,
                                    tuple(config.network.policy_layers),
                                    tuple(config.network.value_layers))
  return ppo.make_gym_networks(
      environment_spec,
      policy_layer_sizes=tuple(config.network.policy_layers),
      value_layer_sizes=tuple(config.network.value_layers))


# Observation normalization (`network.normalize_observations`).
#
# The running mean and variance are parameters of the network (module
# `observation_normalizer`), so actors, evaluators and the learner use the
# same statistics through the variable fetches they already make, and the
# learner checkpoint saves and restores them. Their gradient is stopped, and
# with a zero gradient Adam leaves them as they are; only the learner changes
# them, after each step, from the observations of the batch it trained on.
# Actors act with the statistics of their last fetch, as they do with the
# weights.

NORMALIZER = 'observation_normalizer'
_NORMALIZED_CLIP = 10.0   # Normalized observations are clipped to +-10.
_VARIANCE_EPSILON = 1e-8


class ObservationNormalizer(hk.Module):
  """(x - mean) / sqrt(var), from statistics held as parameters."""

  def __init__(self):
    super().__init__(name=NORMALIZER)

  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    size = x.shape[-1]
    mean = hk.get_parameter('mean', [size], init=jnp.zeros)
    var = hk.get_parameter('var', [size], init=jnp.ones)
    hk.get_parameter('count', [], init=jnp.zeros)  # Observations merged.
    x = (x - jax.lax.stop_gradient(mean)) / jnp.sqrt(
        jax.lax.stop_gradient(var) + _VARIANCE_EPSILON)
    return jnp.clip(x, -_NORMALIZED_CLIP, _NORMALIZED_CLIP)


def make_normalized_networks(environment_spec: specs.EnvironmentSpec,
                             policy_layers, value_layers) -> ppo.PPONetworks:
  """Acme's gym PPO networks (tanh MLPs, diagonal Gaussian policy head) with
  the observations normalized first."""
  num_dimensions = int(np.prod(environment_spec.actions.shape))

  def forward(observations):
    x = ObservationNormalizer()(utils.batch_concat(observations))
    policy = hk.Sequential([
        hk.nets.MLP(policy_layers, activation=jnp.tanh),
        networks_lib.MultivariateNormalDiagHead(num_dimensions)])
    value = hk.Sequential([
        hk.nets.MLP(value_layers, activation=jnp.tanh),
        hk.Linear(1), lambda v: jnp.squeeze(v, axis=-1)])
    return policy(x), value(x)

  forward = hk.without_apply_rng(hk.transform(forward))
  dummy = utils.add_batch_dim(utils.zeros_like(environment_spec.observations))
  return ppo.make_ppo_networks(networks_lib.FeedForwardNetwork(
      lambda key: forward.init(key, dummy), forward.apply))


def merge_statistics(mean: np.ndarray, var: np.ndarray, count: float,
                     batch: np.ndarray):
  """Running mean, variance and count with a [N, D] batch merged in (Chan et
  al.'s parallel update, exact for any batch sizes)."""
  n = batch.shape[0]
  total = count + n
  delta = batch.mean(axis=0) - mean
  new_mean = mean + delta * (n / total)
  sum_of_squares = var * count + batch.var(axis=0) * n + delta**2 * (count * n / total)
  return new_mean, sum_of_squares / total, total


class ObservationTap(Iterator[reverb.ReplaySample]):
  """The learner's dataset, keeping the observations of the last batch."""

  def __init__(self, iterator: Iterator[reverb.ReplaySample]):
    self._iterator = iterator
    self.observations: Optional[np.ndarray] = None

  def __next__(self) -> reverb.ReplaySample:
    sample = next(self._iterator)
    leaves = jax.tree_util.tree_leaves(sample.data.observation)
    # [batch, time, ...] leaves -> [batch x time, D], in batch_concat's order.
    rows = leaves[0].shape[0] * leaves[0].shape[1]
    self.observations = np.concatenate(
        [np.asarray(leaf, np.float64).reshape(rows, -1) for leaf in leaves],
        axis=-1)
    return sample


class ObservationStatsLearner(core.Learner):
  """Acme's PPO learner, merging each batch into the normalizer afterwards."""

  def __init__(self, learner: ppo.PPOLearner, tap: ObservationTap):
    self._learner = learner
    self._tap = tap

  def step(self) -> None:
    self._learner.step()
    state = self._learner.save()
    stats = state.params[NORMALIZER]
    mean, var, count = merge_statistics(
        np.asarray(stats['mean'], np.float64), np.asarray(stats['var'], np.float64),
        float(stats['count']), self._tap.observations)
    params = dict(state.params)
    params[NORMALIZER] = {
        'mean': jnp.asarray(mean, jnp.float32),
        'var': jnp.asarray(var, jnp.float32),
        'count': jnp.asarray(count, jnp.float32)}
    self._learner.restore(state._replace(params=params))

  def get_variables(self, names: List[str]) -> List[networks_lib.Params]:
    return self._learner.get_variables(names)

  def save(self):
    return self._learner.save()

  def restore(self, state) -> None:
    self._learner.restore(state)


def make_policy(config: ml_collections.ConfigDict, networks: ppo.PPONetworks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  del config, environment_spec  # PPO's policy needs neither.
  return ppo.make_inference_fn(networks, evaluation)


def replay_tables(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec):
  """Its replay (plan/replay_memory.py): a queue of at most
  `max_queue_batches * batch_size + 2` sequences of `unroll_length + 1`
  steps with their log-probs. Acme's SequenceAdder (one environment per
  actor) starts one every `unroll_length` steps, sharing a step; the
  batched adder writes each sequence whole."""
  from acme_launch.plan import replay_memory
  section = config.ppo
  length = int(section.unroll_length) + 1
  period = length if config.envs_per_actor > 1 else length - 1
  return (replay_memory.sequence_layout(
      section.get('replay_table_name', ppo.PPOConfig.replay_table_name),
      int(section.max_queue_batches) * int(section.batch_size) + 2,
      environment_spec, length, period,
      fields=('config.ppo.max_queue_batches', 'config.ppo.batch_size',
              'config.ppo.unroll_length'),
      extras={'log_prob': replay_memory.scalar('', 'float32')}),)

