"""What the off-policy adapters share: replay checks, discrete actions, and
the layout of their n-step transition tables.

Acme's builders turn `min_replay_size`, `max_replay_size`,
`samples_per_insert` and `samples_per_insert_tolerance_rate` into a Reverb
table with a `SampleToInsertRatio` rate limiter inside the replay node. Reverb
rejects some combinations there, after every node has started; these checks
run in the launcher instead, so bad values exit 2 before anything starts.
"""

import dataclasses

import ml_collections

from acme_launch import errors


def check_discrete_actions(agent: str, config: ml_collections.ConfigDict,
                           environment_spec) -> None:
  """Q-learning agents (DQN, R2D2) pick one of N actions."""
  from acme import specs
  if not isinstance(environment_spec.actions, specs.DiscreteArray):
    raise errors.LaunchError(
        f'agent {agent} needs discrete actions; {config.env_name} has '
        f'{type(environment_spec.actions).__name__} actions')


def check(section_name: str, section: ml_collections.ConfigDict) -> None:
  """Raises LaunchError with one line for the first bad replay field."""

  def fail(message: str):
    raise errors.LaunchError(f'config.{section_name}.{message}')

  for name in ('batch_size', 'min_replay_size', 'max_replay_size'):
    if section[name] < 1:
      fail(f'{name} must be a positive integer, got {section[name]}')
  if section.max_replay_size < section.min_replay_size:
    fail(f'max_replay_size ({section.max_replay_size}) must be >= '
         f'min_replay_size ({section.min_replay_size})')
  if section.samples_per_insert <= 0:
    fail(f'samples_per_insert must be > 0, got {section.samples_per_insert}')
  # Reverb's SampleToInsertRatio needs an error buffer of at least
  # max(1, samples_per_insert) samples on either side; Acme's builders make it
  # min_replay_size * tolerance_rate * samples_per_insert.
  buffer = (section.min_replay_size * section.samples_per_insert_tolerance_rate
            * section.samples_per_insert)
  if buffer < max(1.0, section.samples_per_insert):
    fail('samples_per_insert_tolerance_rate is too small for min_replay_size '
         f'{section.min_replay_size}: min_replay_size * tolerance_rate * '
         f'samples_per_insert = {buffer:g} must be >= '
         f'max(1, samples_per_insert) = {max(1.0, section.samples_per_insert):g}')


def acme_field(section: ml_collections.ConfigDict, acme_config_class,
               name: str):
  """`section.name`, else the Acme config dataclass's default."""
  if name in section:
    return section[name]
  return {f.name: f.default for f in dataclasses.fields(acme_config_class)
          }[name]


def transition_tables(agent: str, config: ml_collections.ConfigDict,
                      environment_spec, acme_config_class):
  """The one table of Acme's n-step transition agents (DQN, SAC, TD3,
  D4PG): `max_replay_size` transitions of `n_step`, an item per step."""
  from acme_launch.plan import replay_memory
  section = config[agent]
  return (replay_memory.transition_layout(
      acme_field(section, acme_config_class, 'replay_table_name'),
      acme_field(section, acme_config_class, 'max_replay_size'),
      environment_spec, acme_field(section, acme_config_class, 'n_step'),
      fields=(f'config.{agent}.max_replay_size',)),)
