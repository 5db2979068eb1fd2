"""Random search: --sweep values that are ranges, and the points drawn.

With --sweep_samples=N a --sweep value may be a range, and the sweep draws
N points instead of making the grid:

    FIELD=uniform(LOW,HIGH)      a float, uniform in [LOW, HIGH]
    FIELD=loguniform(LOW,HIGH)   a float, uniform in log between them (LOW > 0)
    FIELD=int(LOW,HIGH)          an int, uniform among LOW..HIGH (both included)
    FIELD=V1,V2,...              one of the values, each as likely

A range is its field's only value, and fits its field's type: uniform and
loguniform a float field, int an int field (a bool, string, tuple or None
field takes lists only). Draws come from random.Random(--sweep_seed), field
by field in the order given, point by point, so the same flags draw the same
points; a draw that repeats an earlier point is drawn again. A space of
ints and lists only is finite: its points are numbered and `samples` of
the numbers drawn without replacement (random.sample), so any request up
to the space's size is met, however close to it. Drawn floats are
rounded, to keep point names short: loguniform to 4 significant digits,
uniform to 1/10,000 of the range's width or finer; a rounded value outside
the range is kept unrounded. The points' values go to sweep.json like a
grid's, so --resume runs them again and draws nothing.
"""

import dataclasses
import math
import random
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from acme_launch import errors

DISTRIBUTIONS = ('uniform', 'loguniform', 'int')
_CALL = re.compile(r'([A-Za-z_]\w*)\s*\((.*)\)', re.DOTALL)
# Past this many draws that repeat earlier points, the space is too small.
_MAX_REPEATS = 1000


@dataclasses.dataclass(frozen=True)
class Range:
  kind: str        # One of DISTRIBUTIONS.
  low: Any         # int for 'int', float otherwise.
  high: Any
  text: str        # As given, e.g. loguniform(1e-5,1e-3).

  def draw(self, rng: random.Random) -> str:
    """One value, as the text of a --config.FIELD=VALUE flag."""
    if self.kind == 'int':
      return str(rng.randint(self.low, self.high))
    if self.kind == 'loguniform':
      value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
      rounded = float(f'{value:.4g}')
    else:
      value = rng.uniform(self.low, self.high)
      places = 4 - math.floor(math.log10(self.high - self.low))
      rounded = round(value, places)
    value = min(max(value, self.low), self.high)  # exp(log(x)) may miss x.
    return repr(rounded if self.low <= rounded <= self.high else value)

  def size(self) -> float:
    """How many values it can draw (inf for a float range)."""
    return self.high - self.low + 1 if self.kind == 'int' else math.inf


def parse_range(field: str, value: str) -> Optional[Range]:
  """`value` as a range (None for a plain value); LaunchError for an
  unknown distribution, bounds that are not numbers, or an empty range."""
  match = _CALL.fullmatch(value.strip())
  if not match:
    return None
  kind, arguments = match.group(1), match.group(2)
  if kind not in DISTRIBUTIONS:
    raise errors.LaunchError(
        f'--sweep: {field}={value}: unknown distribution {kind}; choose '
        f'uniform(LOW,HIGH), loguniform(LOW,HIGH) or int(LOW,HIGH)')
  bounds = [b.strip() for b in arguments.split(',')]
  number = int if kind == 'int' else float
  try:
    if len(bounds) != 2:
      raise ValueError
    low, high = number(bounds[0]), number(bounds[1])
  except ValueError:
    kind_of = 'integers' if kind == 'int' else 'numbers'
    raise errors.LaunchError(
        f'--sweep: {field}={value}: {kind}(LOW,HIGH) takes two {kind_of}'
    ) from None
  if kind != 'int' and not (math.isfinite(low) and math.isfinite(high)):
    raise errors.LaunchError(f'--sweep: {field}={value}: bounds must be finite')
  if low >= high:
    raise errors.LaunchError(
        f'--sweep: {field}={value}: an empty range (LOW must be below HIGH)')
  if kind == 'loguniform' and low <= 0:
    raise errors.LaunchError(
        f'--sweep: {field}={value}: loguniform needs LOW > 0')
  return Range(kind, low, high, value.strip())


def parse_ranges(fields: Sequence[Tuple[str, List[str]]]) -> Dict[str, Range]:
  """Field -> its range, for the fields given as one; LaunchError for a bad
  range or a range among other values."""
  ranges = {}
  for field, values in fields:
    parsed = [parse_range(field, v) for v in values]
    if any(parsed) and len(values) > 1:
      raise errors.LaunchError(
          f'--sweep: {field}={",".join(values)}: a range is its field\'s only '
          'value; choose a range or a list')
    if parsed[0]:
      ranges[field] = parsed[0]
  return ranges


def _field_type(config, field: str) -> type:
  *parents, key = field.split('.')
  node = config
  for parent in parents:
    node = node[parent]
  return node.get_type(key)


def check_types(config, ranges: Dict[str, Range]) -> None:
  """Each range fits its field: int() an int field, uniform and loguniform a
  float field. LaunchError otherwise."""
  for field, spec in ranges.items():
    kind = _field_type(config, field)
    wanted = int if spec.kind == 'int' else float
    if kind is wanted:
      continue
    if kind in (int, float):
      hint = ('int(LOW,HIGH)' if kind is int else
              'uniform(LOW,HIGH) or loguniform(LOW,HIGH)')
      raise errors.LaunchError(
          f'--sweep: {field}={spec.text}: {field} is {kind.__name__} in the '
          f'config; give it {hint}')
    raise errors.LaunchError(
        f'--sweep: {field}={spec.text}: {field} is '
        f'{"None" if kind is type(None) else kind.__name__} in the config; '
        'a range needs an int or float field (give a list of values)')


def draw(fields: Sequence[Tuple[str, List[str]]], ranges: Dict[str, Range],
         samples: int, seed: int) -> List[Tuple[str, ...]]:
  """`samples` distinct points: per point, a value text per field (in the
  order of `fields`), drawn from random.Random(seed). LaunchError when the
  values cannot give that many distinct points."""
  space = math.prod(ranges[f].size() if f in ranges else len(values)
                    for f, values in fields)
  if space < samples:
    raise errors.LaunchError(
        f'--sweep_samples={samples}: these --sweep values give only '
        f'{space} distinct points')
  rng = random.Random(seed)
  if math.isfinite(space):  # Ints and lists: drawn without replacement.
    return [_nth_point(fields, ranges, index)
            for index in rng.sample(range(space), samples)]
  points: List[Tuple[str, ...]] = []
  seen, repeats = set(), 0
  while len(points) < samples:
    point = tuple(ranges[f].draw(rng) if f in ranges else rng.choice(values)
                  for f, values in fields)
    if point in seen:
      repeats += 1
      if repeats > _MAX_REPEATS:
        raise errors.LaunchError(
            f'--sweep_samples={samples}: drew only {len(points)} distinct '
            'points from these --sweep values; widen a range or ask fewer')
      continue
    seen.add(point)
    points.append(point)
  return points


def _nth_point(fields: Sequence[Tuple[str, List[str]]],
               ranges: Dict[str, Range], index: int) -> Tuple[str, ...]:
  """The point numbered `index` of a finite space, the last field's value
  moving fastest (as in the grid)."""
  point = []
  for field, values in reversed(fields):
    spec = ranges.get(field)
    size = int(spec.size()) if spec else len(values)
    index, at = divmod(index, size)
    point.append(str(spec.low + at) if spec else values[at])
  return tuple(reversed(point))
