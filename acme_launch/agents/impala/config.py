"""`config.impala` as Acme's IMPALAConfig (dm-acme 0.4.0), with its fields
and the network's checked before launch: Acme would fail on them after."""

import math

from acme_launch import compat  # JAX aliases; before acme
from acme.agents.jax import impala
import ml_collections

from acme_launch import errors
from acme_launch.agents import images
from acme_launch.agents import replay_fields
from acme_launch.agents.impala import networks as impala_networks

# Fields of `config.impala` that are ours, not IMPALAConfig's, and their
# defaults (Acme's actor fetches parameters every 1,000 steps).
OWN_FIELDS = {'variable_update_period': 1000}


def impala_config(config: ml_collections.ConfigDict) -> impala.IMPALAConfig:
  """Acme's IMPALAConfig from `config.impala` (`sequence_period` 0 is
  Acme's default: `sequence_length - 1`, sequences sharing one step)."""
  fields = {k: v for k, v in config.impala.to_dict().items()
            if k not in OWN_FIELDS}
  if not fields.get('sequence_period'):
    fields['sequence_period'] = None
  return impala.IMPALAConfig(**fields)


def check(config: ml_collections.ConfigDict, environment_spec) -> None:
  """LaunchError (one line) for the first bad `config.impala` or
  `config.network` field; Acme would fail on them after launch."""
  replay_fields.check_discrete_actions('impala', config, environment_spec)
  get = lambda name: field(config, name)

  def fail(message: str):
    raise errors.LaunchError(f'config.impala.{message}')

  batch, length = get('batch_size'), get('sequence_length')
  period = get('sequence_period') or 0
  for name, value, least in (
      ('batch_size', batch, 1), ('sequence_length', length, 2),
      ('sequence_period', period, 0),
      ('variable_update_period', get('variable_update_period'), 1)):
    if value < least:
      fail(f'{name} must be >= {least}, got {value}')
  if period >= length:
    fail(f'sequence_period ({period}) must be less than sequence_length '
         f'({length}), or 0 for sequence_length - 1: sequences share their '
         'last step, which the learner uses only to bootstrap')
  if not 0 < get('samples_per_insert') <= 1:
    fail('samples_per_insert must be in (0, 1] (a queue samples each '
         f'sequence at most once), got {get("samples_per_insert")}')
  if get('max_queue_size') <= batch + 1:
    fail(f'max_queue_size ({get("max_queue_size")}) must be more than '
         f'batch_size + 1 ({batch + 1}): an episode\'s last step can write '
         'two sequences at once')
  for name in ('learning_rate', 'max_abs_reward', 'max_gradient_norm'):
    if not get(name) > 0:
      fail(f'{name} must be > 0, got {get(name)}')
  for name in ('entropy_cost', 'baseline_cost'):
    if get(name) < 0 or not math.isfinite(get(name)):
      fail(f'{name} must be >= 0, got {get(name)}')
  torso = config.network.get('torso', 'conv')
  if torso not in impala_networks.TORSOS:
    raise errors.LaunchError(
        f'config.network.torso must be one of '
        f'{", ".join(impala_networks.TORSOS)}, got {torso!r}')
  if torso == 'conv':
    images.check('impala', config.network, environment_spec.observations)
  if config.network.lstm_size < 1:
    raise errors.LaunchError(
        f'config.network.lstm_size must be >= 1, got '
        f'{config.network.lstm_size}')


def field(config: ml_collections.ConfigDict, name: str):
  """`config.impala.<name>`, else its default: ours, or IMPALAConfig's
  (its queue of ten batches counted in sequences)."""
  section = config.impala
  if name in section:
    return section[name]
  if name in OWN_FIELDS:
    return OWN_FIELDS[name]
  if name == 'max_queue_size':
    return 10 * field(config, 'batch_size')
  return replay_fields.acme_field(section, impala.IMPALAConfig, name)
