"""Populations taking turns in Ray Tune, their members deterministic
stand-ins for programs: each Tune step is one segment to the next
boundary, scored from a fixed table, as trials.MemberTrial reports a
segment. The scheduler is the sweep's own (population.make) in Tune's own
controller, on the sweep's own local Ray instance (local_ray.started):
what decides whether the members wait, are compared, copy one another and
end.

`python -m tests.sweep.tune_members SPECS_JSON` (a process of its own: Ray
starts and stops in it) runs each population in turn on one instance and
prints a JSON line for each thing Tune or the scheduler told, with the
population's index, and {'ended': ...} when its fit returned. A SPEC:
{'scores': {member: return per 1,000 actor steps}, 'fails': {member: how
it ends at its first segment, before the first boundary: 'raises' (fails
past its retries) or 'ends' (its restart exits 2)}, 'interval' and
'budget' in actor steps, 'through': whether the members run at once, each
frozen at a boundary until the comparison (else they take turns);
optionally, a population resumed after a stop: 'compared' (the last
boundary compared before it, as sweep.json's `population.compared`) and
'steps' ({member: the actor steps its run directory holds})}. A member's
actor steps are kept in a file of its own, as in its run directory: a
copy takes the donor's skill, never its steps.
"""

import json
import os
import sys
import time

from ray import tune

from acme_launch.sweep import local_ray
from acme_launch.sweep import population


class Member(tune.Trainable):
  """One segment a step; its `skill` (its return per 1,000 steps) kept in
  its Tune checkpoint (a copy takes the donor's), its actor steps in its
  own file."""

  def setup(self, config, spec):
    self._spec = spec
    self._name = config['point']
    self._skill = spec['scores'][self._name]
    self._run_dir = os.path.join(spec['steps_dir'], self._name)
    try:
      with open(self._run_dir) as f:
        self._steps = int(f.read())
    except FileNotFoundError:  # Its first start, or the first after a stop.
      self._steps = spec.get('steps', {}).get(self._name, 0)

  def _compared(self):
    with open(self._spec['compared_path']) as f:
      return int(f.read())

  def _trained_to(self, steps):
    self._steps = steps
    with open(self._run_dir, 'w') as f:
      f.write(str(steps))

  def step(self):
    spec = self._spec
    if self._name in spec['fails']:
      if spec.get('through'):
        self._after_the_others_reached_the_boundary()
      if spec['fails'][self._name] == 'raises':
        raise RuntimeError(f'{self._name}: its program failed')
      return {'event': 'ended', 'point': self._name, 'exit_code': 2,
              'done': True}
    if spec.get('through'):
      return self._through()
    # As trials.MemberTrial's start: to the boundary after the last one
    # compared (a resumed member past it stops there again), or the budget.
    self._trained_to(population.segment_end(
        self._steps, spec['interval'], spec['budget'], self._compared()))
    if self._steps >= spec['budget']:
      return {'event': 'ended', 'point': self._name, 'exit_code': 0,
              'done': True}
    return {'event': 'segment', 'point': self._name,
            'segment_steps': self._steps,
            'segment_return': self._skill * self._steps / 1000}

  def _through(self):
    """Running through, frozen at the next boundary (its score there)
    until the population is compared there (the driver's `compared`)."""
    time.sleep(0.5)  # A report's period, shortened.
    spec = self._spec
    boundary = self._compared() + spec['interval']
    self._trained_to(min(spec['budget'], boundary, self._steps + 500))
    if self._steps >= spec['budget']:
      return {'event': 'ended', 'point': self._name, 'exit_code': 0,
              'done': True}
    reached = self._steps >= boundary
    if reached:
      open(os.path.join(spec['reached'], self._name), 'w').close()
    return {'event': 'segment' if reached else 'progress',
            'point': self._name,
            'segment_steps': boundary if reached else boundary - spec[
                'interval'], 'segment_return': (
                    self._skill * self._steps / 1000 if reached
                    else float('nan'))}

  def _after_the_others_reached_the_boundary(self):
    """Running through, the members start at once: a failing one waits
    until each of the others has reported the first boundary, so that it
    ends while they wait there (else it may end before they get there)."""
    spec = self._spec
    others = set(spec['scores']) - set(spec['fails'])
    deadline = time.monotonic() + 120
    while not others <= set(os.listdir(spec['reached'])):
      if time.monotonic() > deadline:
        raise TimeoutError(f'{self._name}: the others never reached it')
      time.sleep(0.1)
    time.sleep(1.0)  # Their reports reach the scheduler first.

  def save_checkpoint(self, checkpoint_dir):
    with open(os.path.join(checkpoint_dir, 'member.json'), 'w') as f:
      json.dump({'point': self._name, 'skill': self._skill}, f)

  def load_checkpoint(self, checkpoint_dir):
    with open(os.path.join(checkpoint_dir, 'member.json')) as f:
      self._skill = json.load(f)['skill']  # Its own, or the one it copies.


def _run(index, spec, folder, slots) -> None:
  def say(**line):
    print(json.dumps({'population': index, **line}), flush=True)

  spec = {**spec, 'compared_path': os.path.join(folder, f'compared-{index}'),
          'reached': os.path.join(folder, f'reached-{index}'),
          'steps_dir': os.path.join(folder, f'steps-{index}')}
  os.makedirs(spec['reached'])
  os.makedirs(spec['steps_dir'])

  def compared(steps):
    with open(spec['compared_path'], 'w') as f:
      f.write(str(steps))
    say(event='compared', steps=steps)

  compared(spec.get('compared', 0))

  names = {}

  class Told(tune.Callback):
    def on_trial_start(self, iteration, trials, trial, **info):
      names.setdefault(trial.trial_id, trial.config['point'])

    def on_trial_result(self, iteration, trials, trial, result, **info):
      say(event=result['event'], point=names[trial.trial_id],
          steps=result.get('segment_steps'))

    def on_trial_error(self, iteration, trials, trial, **info):
      say(event='error', point=trial.config['point'])

  scheduler = population.make(
      {'interval_steps': spec['interval'], 'quantile': 0.25,
       'resample_probability': 0.25,
       'space': {'lr': {'kind': 'uniform', 'low': 0.0, 'high': 1.0}}},
      lambda member, donor, steps, *_: say(
          event='exploit', member=names[member], copied=names[donor],
          steps=steps),
      through=bool(spec.get('through')), compared=spec.get('compared', 0),
      on_compared=compared,
      on_left_out=lambda steps, members: say(
          event='left_out', steps=steps,
          members=sorted(names[m] for m in members)))
  tuner = tune.Tuner(
      # Taking turns: one at a time. Through: all at once.
      tune.with_resources(tune.with_parameters(Member, spec=spec), {
          'cpu': 1 if spec.get('through') else slots}),
      param_space={'point': tune.grid_search(sorted(spec['scores'])),
                   'values': {'lr': 0.5}},
      tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=False),
      run_config=tune.RunConfig(
          name=f'tune-{index}', storage_path=folder, verbose=0,
          callbacks=[Told()],
          failure_config=tune.FailureConfig(max_failures=0)))
  began = time.monotonic()
  tuner.fit()
  say(ended=True, seconds=round(time.monotonic() - began, 1))


def main(specs) -> None:
  slots = max(len(spec['scores']) for spec in specs)
  with local_ray.started(slots) as instance:
    for index, spec in enumerate(specs):
      _run(index, spec, instance.folder, slots)


if __name__ == '__main__':
  main(json.loads(sys.argv[1]))
