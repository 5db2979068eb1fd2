"""One run's final evaluation: its spread, and whether its episodes split.

A mean +- std hides the shape that matters most for PPO on HalfCheetah: a
policy that runs from most starts and stands still from a few
(docs/results.md, "episodes that stand still") reads 1,993 +- 2,501, and so
does one whose episodes spread evenly. The median, the lowest and the
highest episode, and a sentence when the episodes fall into groups far
apart, show which it is without opening final_eval.json.

Groups far apart ("split"), as defined here: sort the returns and take the
widest gap between neighbours. The episodes split there when that gap is
  - at least half the range (lowest to highest): the gap, not an even
    spread, makes the range; and
  - at least a quarter of the largest absolute return: far apart in the
    task's own units, not a tight evaluation's noise (5,400 against 5,550).
Either side may hold one episode: one still start in ten is what to see.
"""

from typing import Any, Dict, Optional, Sequence

import numpy as np

GAP_OF_RANGE = 0.5
GAP_OF_SCALE = 0.25


def split(returns: Sequence[float]) -> Optional[Dict[str, Any]]:
  """The two groups, {'low': [...], 'high': [...]} (each sorted), when the
  episodes split as the module says; None when they do not (or fewer than
  two episodes)."""
  values = np.sort(np.asarray(returns, dtype=float))
  if values.size < 2:
    return None
  gaps = np.diff(values)
  at = int(np.argmax(gaps))
  gap, spread = gaps[at], values[-1] - values[0]
  scale = np.abs(values).max()
  if gap <= 0 or gap < GAP_OF_RANGE * spread or gap < GAP_OF_SCALE * scale:
    return None
  return {'low': values[:at + 1].tolist(), 'high': values[at + 1:].tolist()}


def _group(values, total: int) -> str:
  n = len(values)
  where = (f'at {values[0]:,.0f}' if values[0] == values[-1] else
           f'{values[0]:,.0f} to {values[-1]:,.0f}')
  return f'{n} of {total} {where}'


def split_sentence(groups: Optional[Dict[str, Any]]) -> Optional[str]:
  """'episodes split into two groups far apart: 6 of 10 -101 to -6, 4 of
  10 4,997 to 5,098', or None."""
  if not groups:
    return None
  total = len(groups['low']) + len(groups['high'])
  return ('episodes split into two groups far apart: '
          f'{_group(groups["low"], total)}, {_group(groups["high"], total)}')


def episode_spread(returns: Sequence[float]) -> Dict[str, Any]:
  """Mean, std (population), median, lowest, highest and the split of one
  evaluation's episode returns; the split sentence None when none."""
  values = np.asarray(returns, dtype=float)
  if values.size == 0:
    raise ValueError('no episode returns')
  groups = split(values)
  return {
      'mean': float(values.mean()), 'std': float(values.std()),
      'median': float(np.median(values)), 'min': float(values.min()),
      'max': float(values.max()), 'episodes': int(values.size),
      'split': groups, 'split_sentence': split_sentence(groups),
  }
