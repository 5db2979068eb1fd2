"""Figures as the bench scripts print them in their tables."""

from typing import Optional


def number(value: Optional[float], spec: str = ',.0f',
           missing: str = 'failed') -> str:
  """`value` formatted by `spec` (thousands separated, no decimals by
  default); `missing` for a figure that was not measured (None)."""
  return missing if value is None else format(value, spec)
