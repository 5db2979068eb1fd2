"""How Ray Tune runs a sweep's points: in order to their budgets (fifo), or
with early stopping (asha: asynchronous successive halving, Li et al. 2018).

Early stopping is Tune's ASHAScheduler, with rungs in actor steps on the
evaluation return: its `time_attr` is the actor steps at which the
point's latest evaluation was taken (`eval_steps`, reported by each trial
from the run's evaluations), so a point is judged at a rung on its first
evaluation at or after it, never on one taken before the rung. Rungs sit at the grace steps times powers of the
reduction factor, up to the budget / reduction (the points kept at the last
rung train on to the budget, judged no more): with a 1M-step budget,
reduction 3 and grace 111,111, points are judged at 111,111 and 333,333
steps. At
a rung a point goes on if its return is among the best 1/reduction of the
points that reached that rung before it (the first to reach one always
goes on); else Tune stops its trial, whose child launcher is stopped as
Ctrl-C stops a run (checkpoints saved). A point is never stopped for
reaching its budget: its launcher ends it there, with its final evaluation.

Why it stopped is written where a user looks: `POINT/stopped_early.json`
in its run directory (the rung, its actor steps, its return and the
cutoff), the sweep's table, and the terminal. A stopped point counts as
finished: `--resume` does not run it again (Tune's rungs themselves are
not kept: a resumed sweep's rungs fill again from the points it runs).
"""

import math
import os
from typing import Any, Dict, Optional

from acme_launch import errors
from acme_launch import layout

STOPPED_EARLY = 'stopped_early'
DEFAULT_REDUCTION = 3


def stopped_early_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'stopped_early.json')


def read_stopped_early(run_dir: str) -> Optional[Dict[str, Any]]:
  return layout.read_json(stopped_early_path(run_dir))


def asha_settings(budget: int, eval_every_steps: int, grace_steps: int,
                  reduction: int) -> Dict[str, Any]:
  """sweep.json's `scheduler` for ASHA, checked; LaunchError if bad."""
  reduction = reduction or DEFAULT_REDUCTION
  grace = grace_steps or max(1, budget // reduction ** 2)
  last = budget // reduction  # The last rung: survivors train on from it.
  if grace > last:
    raise errors.LaunchError(
        f'--asha_grace_steps={grace}: the first rung must be at most the '
        f'budget / {reduction} ({last:,} actor steps), so that the points '
        'kept there train on')
  if eval_every_steps and grace < eval_every_steps:
    raise errors.LaunchError(
        f'--asha_grace_steps={grace}: the first rung comes before the first '
        f'evaluation (eval_every_steps={eval_every_steps:,}); a rung compares '
        'evaluation returns')
  # Tune's own count of rungs up to its max_t (`last`), so that these are
  # the rungs its ASHA judges at.
  count = int(math.log(last / grace) / math.log(reduction) + 1)
  rungs = [grace * reduction ** k for k in range(count)]
  return {'name': 'asha', 'grace_steps': grace, 'reduction': reduction,
          'max_steps': budget, 'last_rung_max': last, 'rungs': rungs, 'metric': 'eval_return',
          'time_attr': 'eval_steps'}


def make(settings: Optional[Dict[str, Any]], sweep_dir: str):
  """Tune's scheduler for sweep.json's `scheduler` (None: fifo)."""
  if not settings or settings.get('name') != 'asha':
    return None
  from ray.tune.schedulers import ASHAScheduler
  from ray.tune.schedulers import TrialScheduler

  class RecordingASHA(ASHAScheduler):
    """Tune's ASHA, writing each stop's reason into the point's run dir."""

    def on_trial_result(self, tune_controller, trial, result):
      judged = self._judged_at(trial, result)
      action = super().on_trial_result(tune_controller, trial, result)
      if action == TrialScheduler.STOP and judged is not None:
        rung, cutoff = judged
        point = trial.config['point']
        value = float(result['eval_return'])
        layout.write_json_atomic(
            stopped_early_path(os.path.join(sweep_dir, point)), {
                'by': 'asha', 'rung_steps': rung,
                'actor_steps': int(result['actor_steps']),
                'eval_steps': int(result['eval_steps']),
                'eval_return': value, 'cutoff': cutoff,
                'why': (f'at the rung of {rung:,} actor steps its evaluation '
                        f'return {value:.1f} was below {cutoff:.1f}, the best '
                        f'1/{settings["reduction"]} of the points there '
                        'before it')})
      return action

    def _judged_at(self, trial, result):
      """(rung, cutoff) this result is judged at, before it is recorded."""
      if 'eval_steps' not in result or 'eval_return' not in result:
        return None
      bracket = self._trial_info.get(trial.trial_id)
      if bracket is None:
        return None
      for milestone, recorded in bracket._rungs:  # Descending.
        if result['eval_steps'] >= milestone:
          if trial.trial_id in recorded:
            return None
          cutoff = bracket.cutoff(recorded)
          return (int(milestone), None if cutoff is None else float(cutoff))
      return None

  return RecordingASHA(
      time_attr='eval_steps', metric='eval_return', mode='max',
      # Rungs up to the budget / reduction: a point kept at the last one
      # trains on to its budget, judged no more.
      max_t=int(settings['last_rung_max']),
      grace_period=int(settings['grace_steps']),
      reduction_factor=int(settings['reduction']),
      # Reaching max_t stops nothing: the budget is the launcher's to end,
      # with its final evaluation.
      stop_last_trials=False)
