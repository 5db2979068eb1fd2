"""Acme's JAX PPO (dm-acme 0.4.0) from a `config.ppo` section."""

from typing import Callable

from acme import specs
from acme.adders import reverb as adders_reverb
from acme.agents.jax import ppo
from acme.utils import loggers
import ml_collections
import numpy as np
import optax
import reverb

from acme_launch import batched_adders


class BoundedQueuePPOBuilder(ppo.PPOBuilder):
  """PPOBuilder whose replay queue holds at most `max_queue_size` sequences.

  Acme sizes the queue `batch_size + 1000` for its single-process layout.
  Distributed, that lets actors run up to 1000 sequences ahead of a slow
  learner (stale, off-policy data) and lets a short run end before the
  learner took a step. A bounded queue makes actors wait for the learner.
  """

  def __init__(self, config: ppo.PPOConfig, max_queue_size: int, **kwargs):
    super().__init__(config, **kwargs)
    self._max_queue_size = max_queue_size

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
        self.replay_signature(environment_spec), num_envs)


def make_builder(config: ml_collections.ConfigDict,
                 learner_logger_fn: Callable[[], loggers.Logger],
                 environment_spec: specs.EnvironmentSpec) -> ppo.PPOBuilder:
  del environment_spec  # PPO's config needs nothing from it.
  agent_fields = config.ppo.to_dict()
  queue_batches = agent_fields.pop('max_queue_batches')
  if agent_fields.pop('anneal_learning_rate', False):
    agent_fields['learning_rate'] = annealed_learning_rate(config)
  ppo_config = ppo.PPOConfig(**agent_fields)
  return BoundedQueuePPOBuilder(
      ppo_config, max_queue_size=queue_batches * ppo_config.batch_size + 2,
      logger_fn=learner_logger_fn)


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
  return optax.linear_schedule(config.ppo.learning_rate, 0.0, max(updates, 1))


def make_networks(config: ml_collections.ConfigDict,
                  environment_spec: specs.EnvironmentSpec) -> ppo.PPONetworks:
  return ppo.make_gym_networks(
      environment_spec,
      policy_layer_sizes=tuple(config.network.policy_layers),
      value_layer_sizes=tuple(config.network.value_layers))


def make_policy(config: ml_collections.ConfigDict, networks: ppo.PPONetworks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  del config, environment_spec  # PPO's policy needs neither.
  return ppo.make_inference_fn(networks, evaluation)
