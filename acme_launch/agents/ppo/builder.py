"""PPO's builder: Acme's JAX PPOBuilder (dm-acme 0.4.0) from `config.ppo`,
with a bounded queue, a batched adder, and acme-launch's own fields
(`OUR_FIELDS`: the queue's size, an annealed learning rate, reward and
observation normalization, the final observation rows)."""

from typing import Callable

from acme_launch import compat  # JAX aliases; before acme
from acme import core
from acme import specs
from acme.adders import reverb as adders_reverb
from acme.agents.jax import ppo
from acme.utils import loggers
import ml_collections
import numpy as np
import optax
import reverb

from acme_launch.adders import batched as batched_adders
from acme_launch import errors
from acme_launch.adders import reward_scaling
from acme_launch.agents import replay_fields
from acme_launch.agents.ppo import normalization


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
    tap = normalization.ObservationTap(dataset)
    return normalization.ObservationStatsLearner(
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
      normalize_observations=normalization.normalizes(config),
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


def variable_update_period(config: ml_collections.ConfigDict) -> int:
  """Every how many updates its actors fetch the learner's variables: the
  PPOConfig's `variable_update_period`, as `PPOBuilder.make_actor` reads it."""
  return replay_fields.acme_field(config.ppo, ppo.PPOConfig,
                                  'variable_update_period')


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

