"""What the sweep launcher was asked, as one frozen value: cli.py makes it
from the flags; sweep/plan.py, sweep/runner.py and sweep/record.py read it."""

import dataclasses
from typing import Tuple


@dataclasses.dataclass(frozen=True)
class SweepOptions:
  """What the sweep launcher was asked, as plain values (made in cli.py)."""
  sweep_dir: str                  # Absolute.
  resume: bool                    # sweep_dir holds a sweep.json to finish.
  new_dir: bool = False           # Its name chosen at random: made exclusively.
  specs: Tuple[str, ...] = ()     # --sweep values as given (new sweep only).
  base_argv: Tuple[str, ...] = ()  # launch.py flags for every point.
  config_name: str = ''
  max_concurrent: int = 0         # 0: as many as the host can place.
  gpu_inventory: str = ''         # --gpu_inventory: a JSON file, or ask the driver.
  progress_every: float = 10.0
  dry_run: bool = False
  cwd: str = ''                   # Where the children run (relative paths).
  samples: int = 0                # --sweep_samples; 0: a grid.
  sample_seed: int = 0            # --sweep_seed: what the draws come from.
  scheduler: str = 'fifo'         # --sweep_scheduler: fifo, asha or pbt.
  asha_grace_steps: int = 0       # 0: the budget / reduction^2.
  asha_reduction: int = 0         # 0: 3.
  pbt_interval_steps: int = 0     # 0: the budget / 4.
  pbt_quantile: float = 0.0       # 0: 0.25.
  pbt_freeze: bool = True         # Members frozen between turns (freeze.py).
  trial_retries: int = 0          # A failed program starts again N times.
  # The MLflow URI its points track to (their MLFLOW_TRACKING_URI), with
  # any credentials: sweep.json keeps it masked (credentials.py).
  tracking_uri: str = ''
