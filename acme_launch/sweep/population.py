"""Population-based training (Jaderberg et al. 2017) of a sweep's points.

With --sweep_scheduler=pbt the sweep's points (the grid, or random search's
draws) are the members of one population, compared every
--pbt_interval_steps actor steps by Ray Tune's PopulationBasedTraining in
its synchronous mode: when every member has its score at a boundary (its
first evaluation there), each member of the worst --pbt_quantile copies
the learner checkpoint of one of the best (exploit) and continues with
that member's values perturbed (explore: a range's value times 0.8 or
1.2, or drawn again, kept within the range; a list's value moved to a
neighbour, or drawn again).

How the members run is the plan's choice (plan.py, `members_at_once` in
sweep.json; trials.MemberTrial does either):
- at once, when the host or cluster holds every member's program, each on
  a slot of its own (as many cores, GPU slots or cluster shares as
  members): each program runs through to its budget, and only a member
  that copies another stops and starts again with --resume, from the
  copied learner and with its new values;
- taking turns, when it holds fewer: each program runs one segment to the
  next boundary and stops there with its checkpoints saved, its final
  evaluation its score; Tune pauses it and starts it again for the next.
Members never share a slot: 8 `ppo_mujoco` programs at once on 2 cores
made about two thirds of the actor steps per second of the same programs
two at a time, and a restart under that load took minutes.

What is copied is the learner's checkpoint (RUN_DIR/checkpoints/learner:
parameters, optimizer state, observation normalizer, whatever the agent's
learner saves), through the TF checkpointer's files; the member keeps its
own run directory, counter (its actor steps go on from its own) and replay
(the experience its own actors gathered). So a member's steps and its
budget stay comparable with a plain sweep's, and an exploit moves only what
was learned. A member copied while its program runs has its learner saved
on request (layout.learner_save_request_path), so what is copied is the
learner as it is at the comparison, a little past the boundary.

Values that would change a shape or the program's topology cannot be
perturbed: a learner checkpoint holds parameters of the network's shapes
and a replay checkpoint the tables of its signature, and a member restarts
with its own nodes. Such fields are refused in the space (`check_space`).

The record of what happened, in sweep.json: each member's score and values
at each boundary (its `segments`), and in `population.exploits` who copied
whom, at which step, the values before and after; `population.compared`,
the last boundary compared, so that a --resume compares at the next one.
"""

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from acme_launch import errors
from acme_launch.sweep import sample

DEFAULT_QUANTILE = 0.25
RESAMPLE_PROBABILITY = 0.25
PERTURBATION_FACTORS = (1.2, 0.8)

# Fields whose values cannot change inside a population: (pattern, why).
_REFUSED = (
    (r'network\..*', 'it sets the networks\' shapes, which the learner '
     'checkpoint a member copies must match'),
    (r'(num_actors|num_evaluators|envs_per_actor|envpool_async_envs|'
     r'inference|resources\..*)', 'it sets the program\'s nodes'),
    (r'(agent|env_name|env_backend|env_modules|env_max_episode_steps)',
     'it sets the agent or the task'),
    (r'(max_actor_steps|eval_every_steps|eval_episodes|final_eval_episodes|'
     r'checkpoint\..*)', 'the population sets it for every member'),
    (r'.*\.(unroll_length|sequence_length|burn_in_length|batch_size|'
     r'num_minibatches|max_queue_batches|.*_layers|.*_layer_sizes|'
     r'.*hidden.*|.*_size)', 'it sets a shape of the learner or the replay '
     'tables, which the checkpoints a member resumes from must match'),
)


def refused_why(field: str) -> Optional[str]:
  """Why `field` cannot be in a population's space, or None."""
  for pattern, why in _REFUSED:
    if re.fullmatch(pattern, field):
      return why
  return None


def check_space(fields: Sequence[Tuple[str, List[str]]], points: int) -> None:
  """LaunchError for a population of fewer than 2 members or a field that
  cannot change inside one."""
  if points < 2:
    raise errors.LaunchError(
        f'--sweep_scheduler=pbt: a population of {points} member; it needs '
        'at least 2 (give --sweep_samples=N >= 2, or a grid of 2 or more '
        'points)')
  for field, _ in fields:
    if field == 'seed':
      continue  # Each member's own; never perturbed.
    why = refused_why(field)
    if why:
      raise errors.LaunchError(
          f'--sweep_scheduler=pbt: {field} cannot be in a population\'s '
          f'space: {why}')


def member_flags(base_argv: Sequence[str], point_args: Sequence[str],
                 point_fields: Sequence[str],
                 space: Dict[str, Any]) -> Tuple[str, ...]:
  """A member's launch.py flags but its run directory, its budget (each
  segment's own) and the values the population perturbs: the sweep's
  flags and the point's own others (its seed)."""
  base = [a for a in base_argv
          if not a.startswith('--config.max_actor_steps=')]
  own = [a for a, field in zip(point_args, point_fields)
         if field not in space]
  return tuple(base + own)


def settings(fields: Sequence[Tuple[str, List[str]]],
             ranges: Dict[str, sample.Range], budget: int,
             eval_every_steps: int, interval_steps: int,
             quantile: float) -> Dict[str, Any]:
  """sweep.json's `scheduler` for PBT, checked; LaunchError if bad."""
  interval = interval_steps or max(eval_every_steps, budget // 4)
  if eval_every_steps and interval < eval_every_steps:
    raise errors.LaunchError(
        f'--pbt_interval_steps={interval}: shorter than the evaluation '
        f'period (eval_every_steps={eval_every_steps:,}); a member is judged '
        'on its evaluation at the end of each interval')
  if interval >= budget:
    raise errors.LaunchError(
        f'--pbt_interval_steps={interval}: not below the budget '
        f'({budget:,} actor steps): the members would never be compared')
  quantile = quantile or DEFAULT_QUANTILE
  space = {}
  for field, values in fields:
    if field == 'seed':
      continue
    spec = ranges.get(field)
    space[field] = ({'kind': spec.kind, 'low': spec.low, 'high': spec.high}
                    if spec else {'kind': 'choice', 'values': list(values)})
  if not space:
    raise errors.LaunchError(
        '--sweep_scheduler=pbt: nothing to perturb: the --sweep fields are '
        'seeds only; give a field with a range or a list')
  return {'name': 'pbt', 'interval_steps': interval,
          'boundaries': boundaries(interval, budget), 'max_steps': budget,
          'quantile': quantile, 'resample_probability': RESAMPLE_PROBABILITY,
          'space': space, 'metric': 'segment_return',
          'time_attr': 'segment_steps'}


def boundaries(interval: int, budget: int) -> List[int]:
  """The actor steps at which the members are compared (before the budget)."""
  return list(range(interval, budget, interval))


def segment_end(steps: int, interval: int, budget: int,
                compared: Optional[int] = None) -> int:
  """The step at which a member that has `steps` stops next. With
  `compared` (the last boundary the population was compared at), a member
  that already reached the boundary after it (before a --resume) stops
  there again: it is compared on the score it had there."""
  if compared is not None:
    steps = min(steps, compared)
  return min(budget, (steps // interval + 1) * interval)


def member_values(point_fields: Dict[str, Any],
                  space: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
  """A member's first values (Tune's config): a range's as a number, a
  list's as the text given on the command line."""
  values = {}
  for field, spec in space.items():
    value = point_fields[field]
    if spec['kind'] == 'choice':
      value = next(v for v in spec['values'] if _same(v, value))
    values[field] = value
  return values


def _same(text: str, value: Any) -> bool:
  """Whether the command line's `text` is what the config read as `value`."""
  if str(value) == text:
    return True
  try:
    return float(text) == float(value)
  except (TypeError, ValueError):
    return text.lower() == str(value).lower()


def value_text(value: Any) -> str:
  """A value as a --config.FIELD=VALUE flag's text."""
  if isinstance(value, bool) or isinstance(value, str):
    return str(value)
  if isinstance(value, int):
    return str(value)
  return repr(float(f'{value:.4g}'))


def flags(values: Dict[str, Any]) -> List[str]:
  return [f'--config.{f}={value_text(v)}' for f, v in values.items()]


def clip(values: Dict[str, Any],
         space: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
  """Perturbed values brought back into their ranges (Tune does not)."""
  clipped = dict(values)
  for field, spec in space.items():
    if spec['kind'] == 'choice' or field not in clipped:
      continue
    value = min(max(clipped[field], spec['low']), spec['high'])
    rounded = (int(round(value)) if spec['kind'] == 'int'
               else float(f'{value:.4g}'))
    # As sample.Range.draw: a rounded bound can fall outside its range.
    clipped[field] = (rounded if spec['low'] <= rounded <= spec['high']
                      else value)
  return clipped


HOW = {
    'through': 'each member runs through, started again only to copy',
    'frozen': ('each member runs through, frozen at a boundary until the '
               'comparison; started again only to copy'),
    'frozen turns': ('the members take turns on the slots, each frozen at a '
                     'boundary and thawed on a free slot after the '
                     'comparison; started again only to copy'),
    'turns': 'the members take turns, a segment at a time, stopped at each',
}


def how_members_run(record: Dict[str, Any]) -> str:
  """A key of HOW, from the plan's choice in sweep.json."""
  at_once = bool(record.get('members_at_once'))
  if record.get('members_frozen'):
    return 'frozen' if at_once else 'frozen turns'
  return 'through' if at_once else 'turns'


def describe(settings_: Dict[str, Any], how: str) -> str:
  """', population-based training: compared at N, M actor steps, ...'."""
  steps = ', '.join(f'{b:,}' for b in settings_['boundaries'])
  return (f', population-based training (compared at {steps} actor steps; '
          f'the worst {settings_["quantile"]:.0%} copy the best '
          f'{settings_["quantile"]:.0%} and perturb '
          f'{", ".join(settings_["space"])}; {HOW[how]})')


def describe_change(before: Dict[str, Any], after: Dict[str, Any]) -> str:
  """'ppo.learning_rate 0.0003 -> 0.00036; ppo.num_epochs 2' (a value
  that changed, one that did not)."""
  return '; '.join(
      f'{f} {value_text(v)}' if before.get(f) == v else
      f'{f} {value_text(before.get(f))} -> {value_text(v)}'
      for f, v in after.items())


def make(settings_: Dict[str, Any], on_exploit: Callable[..., None],
         through: bool = False, compared: int = 0,
         on_compared: Callable[[int], None] = lambda steps: None,
         on_left_out: Callable[[int, List[str]], None] = lambda s, m: None):
  """Tune's PopulationBasedTraining for sweep.json's `scheduler`, telling
  `on_exploit(member trial id, copied trial id, actor steps, (their
  scores), values before, values after, the copied Tune checkpoint
  folder)` of each exploit it makes at a boundary, then `on_compared(actor
  steps)` once the comparison there is over, each of its exploits told
  (to be recorded then, the members waiting there go on: a --resume after
  a stop in between compares there again). `through`: the members'
  programs run on while the others reach a boundary (trials.MemberTrial),
  where Tune's synchronous mode would pause them. `compared`: the last
  boundary at which a resumed population was compared; the next
  comparison is at the one after it. `on_left_out(actor steps, trial ids)`
  of the members compared there without, which ended before reaching it
  (each at the first such boundary).

  Tune's synchronous PBT compares, when a result arrives, once every live
  trial has its score at the boundary; a member that ended short of it
  (failed past its retries: Tune keeps its trial live; or its restart
  exits 2) would hold the others there for ever. Here the live members
  are those not ended, and members waiting paused (taking turns; no
  result comes) are compared when Tune next looks for one to run."""
  from ray import tune
  from ray.tune.experiment import Trial
  from ray.tune.schedulers import PopulationBasedTraining
  from ray.tune.schedulers import TrialScheduler

  told_left = set()

  class RecordingPBT(PopulationBasedTraining):
    """Tune's PBT, telling the sweep's record of each exploit."""

    def on_trial_add(self, tune_controller, trial):
      super().on_trial_add(tune_controller, trial)
      state = self._trial_state[trial]  # As if compared at `compared`.
      state.last_perturbation_time = state.last_train_time = compared

    def on_trial_result(self, tune_controller, trial, result):
      boundary = self._next_perturbation_sync
      action = super().on_trial_result(_Unended(tune_controller), trial,
                                       result)
      if self._next_perturbation_sync != boundary:
        left = [t.trial_id for t, state in self._trial_state.items()
                if t.is_finished() and state.last_train_time < boundary and
                t.trial_id not in told_left]
        told_left.update(left)  # Named at the first boundary only.
        if left:
          on_left_out(int(boundary), left)
        on_compared(int(boundary))
      if (through and action == TrialScheduler.PAUSE and
          trial.status != Trial.PAUSED):
        return TrialScheduler.CONTINUE  # It waits running, not stopped.
      return action

    def choose_trial_to_run(self, tune_controller):
      chosen = super().choose_trial_to_run(tune_controller)
      live = _Unended(tune_controller).get_live_trials()
      waiting = [t for t in live if t.status == Trial.PAUSED]
      if chosen is None and waiting and all(
          self._trial_state[t].last_train_time >=
          self._next_perturbation_sync for t in live):
        trial = waiting[0]  # Its last result again: all are there now.
        self.on_trial_result(tune_controller, trial,
                             self._trial_state[trial].last_result)
        chosen = super().choose_trial_to_run(tune_controller)
      return chosen

    def _exploit(self, tune_controller, trial, trial_to_clone):
      before = dict(trial.config['values'])
      scores = (self._trial_state[trial].last_score,
                self._trial_state[trial_to_clone].last_score)
      at_steps = self._trial_state[trial_to_clone].last_train_time
      super()._exploit(tune_controller, trial, trial_to_clone)
      checkpoint = self._trial_state[trial_to_clone].last_checkpoint
      on_exploit(trial.trial_id, trial_to_clone.trial_id, int(at_steps),
                 scores, before, dict(trial.config['values']),
                 checkpoint.path)

  space = settings_['space']
  mutations = {}
  for field, spec in space.items():
    if spec['kind'] == 'choice':
      mutations[field] = list(spec['values'])
    elif spec['kind'] == 'loguniform':
      mutations[field] = tune.loguniform(spec['low'], spec['high'])
    elif spec['kind'] == 'uniform':
      mutations[field] = tune.uniform(spec['low'], spec['high'])
    else:
      mutations[field] = tune.randint(spec['low'], spec['high'] + 1)

  def explore(config: Dict[str, Any]) -> Dict[str, Any]:
    config['values'] = clip(config['values'], space)
    return config

  scheduler = RecordingPBT(
      time_attr='segment_steps', metric='segment_return', mode='max',
      perturbation_interval=int(settings_['interval_steps']),
      hyperparam_mutations={'values': mutations},
      quantile_fraction=float(settings_['quantile']),
      resample_probability=float(settings_['resample_probability']),
      perturbation_factors=PERTURBATION_FACTORS,
      custom_explore_fn=explore, log_config=False,
      # The members are compared together at each boundary, each on its
      # first evaluation there; running at once (through) or taking turns.
      synch=True, require_attrs=False)
  scheduler._next_perturbation_sync = (
      compared + int(settings_['interval_steps']))
  return scheduler


class _Unended:
  """Tune's controller, its live trials less those that ended."""

  def __init__(self, controller):
    self._controller = controller

  def get_live_trials(self):
    return [t for t in self._controller.get_live_trials()
            if not t.is_finished()]

  def __getattr__(self, name):
    return getattr(self._controller, name)


def is_population(record: Dict[str, Any]) -> bool:
  return (record.get('scheduler') or {}).get('name') == 'pbt'


def schedule(record: Dict[str, Any], member: str,
             until: Optional[Tuple[int, float]] = None
             ) -> List[Tuple[int, Dict[str, Any]]]:
  """The values a member's learner was trained with, as (actor steps it
  trained to, values) in order, from sweep.json: before the last time it
  copied a member, that member's schedule up to the copy (its learner is
  what it copied), then its own launches. `until`: (actor steps, time) of
  a copy: the launches started before it, up to those steps. Consecutive
  spans with the same values are one."""
  entries = {p['name']: p for p in record['points']}
  launches, carried = [], None
  for launch in entries[member]['launches']:
    if 'values' not in launch or (until is not None and
                                  launch['started'] >= until[1]):
      continue
    if launch.get('retried'):  # Run again by the next: what it copied too.
      carried = launch.get('copied') or carried
      continue
    if carried and not launch.get('copied'):
      launch = {**launch, 'copied': carried}
    carried = None
    launches.append(launch)
  spans = []
  for i, launch in enumerate(launches):
    if 'segment_end' in launch:  # One segment (members taking turns).
      end = launch['segment_end']
    elif i + 1 < len(launches):  # Through to the budget, or to a copy.
      end = launches[i + 1]['from_steps']
    else:
      end = launch['until']
    spans.append((end, launch))
  copies = [i for i, (_, l) in enumerate(spans) if l.get('copied') and i > 0]
  steps: List[Tuple[int, Dict[str, Any]]] = []
  if copies:
    _, copying = spans[copies[-1]]
    copied = copying['copied']
    steps = schedule(record, copied['point'], until=(
        copied['actor_steps'], copied.get('at', copying['started'])))
    spans = spans[copies[-1]:]
  for end, launch in spans:
    if until is not None:
      if steps and steps[-1][0] >= until[0]:
        break
      end = min(end, until[0])
    if steps and steps[-1][1] == launch['values']:
      steps[-1] = (end, launch['values'])
    else:
      steps.append((end, launch['values']))
  return steps
