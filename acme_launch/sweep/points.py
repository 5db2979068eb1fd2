"""The sweep's points: --sweep specs parsed, checked against the config, and
made into named points (the grid's, or random search's draws: sample.py)."""

import collections
import dataclasses
import itertools
import re
from typing import Any, Callable, List, Sequence, Tuple

from acme_launch import errors

SEED_FIELD = 'seed'


@dataclasses.dataclass(frozen=True)
class Point:
  name: str                       # seed=0, ppo.learning_rate=0.001,seed=1
  fields: Tuple[Tuple[str, Any], ...]   # (field, value as the config holds it)
  args: Tuple[str, ...]           # --config.FIELD=VALUE as given
  max_actor_steps: int
  uses_gpus: bool = False

  @property
  def setting(self) -> str:
    """The point's name less its seed: points of one setting differ only
    in seed."""
    return _join([(f, v) for f, v in self.fields if f != SEED_FIELD])


@dataclasses.dataclass(frozen=True)
class Checked:
  """What checking a point's launch.py flags found (the CLI's validate)."""
  config: Any                     # Its resolved config.
  uses_gpus: bool                 # Its plan uses GPUs.
  demands: Tuple[Any, ...] = ()   # --launch_type=ray: its nodes' Ray demands.


def _split_values(text: str) -> List[str]:
  """'1,2,(3,4)' -> ['1', '2', '(3,4)']: commas inside brackets or quotes
  belong to the value (tuple fields)."""
  values, depth, quote, current = [], 0, '', ''
  for char in text:
    if quote:
      quote = '' if char == quote else quote
    elif char in '\'"':
      quote = char
    elif char in '([{':
      depth += 1
    elif char in ')]}':
      depth -= 1
    elif char == ',' and depth == 0:
      values.append(current.strip())
      current = ''
      continue
    current += char
  values.append(current.strip())
  return values


def parse_specs(specs: Sequence[str]) -> List[Tuple[str, List[str]]]:
  """--sweep values -> [(field, [value strings])], in the order given.

  Each spec is `FIELD=V1,V2,...`; several fields in one spec are separated
  by ';'. LaunchError for a malformed spec, an empty value or a field twice.
  """
  fields: List[Tuple[str, List[str]]] = []
  for spec in specs:
    for part in spec.split(';'):
      part = part.strip()
      if not part:
        continue
      field, equals, values_text = part.partition('=')
      field = field.strip()
      if field.startswith('config.'):
        field = field[len('config.'):]
      if not equals or not re.fullmatch(r'[A-Za-z_][\w.]*', field):
        raise errors.LaunchError(
            f'--sweep={spec}: expected FIELD=VALUE1,VALUE2,... (fields '
            "separated by ';'), e.g. --sweep=seed=0,1,2")
      values = _split_values(values_text)
      if any(v == '' for v in values):
        raise errors.LaunchError(f'--sweep={spec}: an empty value for {field}')
      if len(set(values)) != len(values):
        raise errors.LaunchError(f'--sweep={spec}: a value of {field} twice')
      if field in [f for f, _ in fields]:
        raise errors.LaunchError(f'--sweep: field {field} is swept twice')
      fields.append((field, values))
  if not fields:
    raise errors.LaunchError('--sweep needs FIELD=VALUE1,VALUE2,..., e.g. '
                             '--sweep=seed=0,1,2')
  return fields


def check_fields(config, fields: Sequence[str],
                 base_argv: Sequence[str]) -> None:
  """Each swept field is a field of the config (not a section), and not also
  set by a --config.FIELD flag."""
  for field in fields:
    node, path = config, field.split('.')
    for i, key in enumerate(path):
      if not hasattr(node, 'keys') or key not in node.keys():
        where = '.'.join(path[:i]) or 'the config'
        known = ', '.join(sorted(node.keys())) if hasattr(node, 'keys') else ''
        raise errors.LaunchError(
            f'--sweep: {field} is not a field of this config ({where} has '
            f'{known or "no fields"})')
      node = node[key]
    if hasattr(node, 'keys'):
      raise errors.LaunchError(
          f'--sweep: {field} is a section of the config; sweep one of its '
          f'fields: {", ".join(sorted(node.keys()))}')
    for arg in base_argv:
      if arg.lstrip('-').split('=', 1)[0] == f'config.{field}':
        raise errors.LaunchError(
            f'--sweep: {field} is also set by {arg}; give its values in '
            '--sweep only')


def _format_value(value: Any) -> str:
  if isinstance(value, (tuple, list)):
    return '(' + ','.join(_format_value(v) for v in value) + ')'
  return str(value)


def _join(fields: Sequence[Tuple[str, Any]]) -> str:
  return ','.join(f'{f}={_format_value(v)}' for f, v in fields)


def safe_name(text: str) -> str:
  """A file name for a point: letters, digits and ._,=+- kept, others '_'."""
  name = re.sub(r'[^A-Za-z0-9._,=+-]', '_', text) or '_'
  # A run name (safe_dirs.check_name) does not start with '.'.
  return '_' + name if name.startswith('.') else name


def field_value(config, field: str) -> Any:
  value = config
  for key in field.split('.'):
    value = value[key]
  return value


def grid(fields: Sequence[Tuple[str, List[str]]]) -> List[Tuple[str, ...]]:
  """The grid's points: every combination of the fields' values."""
  return list(itertools.product(*[v for _, v in fields]))


def make_points(names: Sequence[str], combos: Sequence[Tuple[str, ...]],
                base_argv: Sequence[str],
                validate: Callable[..., Checked]) -> List[Point]:
  """The named points, one per combination of values of the fields `names`
  (the grid, or random search's draws), each checked by `validate(launch.py
  flags)` (which returns what it found, a Checked, or raises LaunchError).
  Point names use the config's own typed
  values, so `1e-3` names `0.001`; two values that read the same are
  refused."""
  points = []
  for values in combos:
    args = tuple(f'--config.{f}={v}' for f, v in zip(names, values))
    label = ','.join(f'{f}={v}' for f, v in zip(names, values))
    try:
      checked = validate([*base_argv, *args])
    except errors.LaunchError as e:
      raise errors.LaunchError(f'sweep point {label}: {e}') from None
    typed = tuple((f, field_value(checked.config, f)) for f in names)
    points.append(Point(safe_name(_join(typed)), typed, args,
                        int(checked.config.max_actor_steps), checked.uses_gpus))
  seen = collections.Counter(p.name for p in points)
  twice = [name for name, count in seen.items() if count > 1]
  if twice:
    raise errors.LaunchError(
        f'--sweep: two values give the same point {twice[0]} (values that '
        'the config reads the same)')
  return points
