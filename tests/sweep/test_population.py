"""A population's settings, refused fields and perturbations (population.py),
with Tune's own perturbation step; populations in Tune's own controller,
their members stand-ins (tests/sweep/tune_members.py): members that end
short of a boundary, a population resumed after a stop."""

import os
import random

import pytest

from acme_launch import errors
from acme_launch.sweep import population
from acme_launch.sweep import sample

FIELDS = [('ppo.learning_rate', ['loguniform(1e-4,1e-2)']),
          ('ppo.num_epochs', ['int(1,4)']),
          ('ppo.entropy_cost', ['0.0', '0.01']), ('seed', ['0', '1'])]


def _settings(**kwargs):
  args = dict(fields=FIELDS, ranges=sample.parse_ranges(FIELDS),
              budget=10_000, eval_every_steps=1_000, interval_steps=2_000,
              quantile=0.0)
  args.update(kwargs)
  return population.settings(**args)


def test_settings_give_the_boundaries_and_the_space_less_the_seed():
  settings = _settings()
  assert settings['boundaries'] == [2000, 4000, 6000, 8000]
  assert settings['quantile'] == population.DEFAULT_QUANTILE
  assert settings['space'] == {
      'ppo.learning_rate': {'kind': 'loguniform', 'low': 1e-4, 'high': 1e-2},
      'ppo.num_epochs': {'kind': 'int', 'low': 1, 'high': 4},
      'ppo.entropy_cost': {'kind': 'choice', 'values': ['0.0', '0.01']}}
  # Default interval: a quarter of the budget.
  assert _settings(interval_steps=0)['boundaries'] == [2500, 5000, 7500]


@pytest.mark.parametrize('kwargs, expected', [
    (dict(interval_steps=500), 'shorter than the evaluation period'),
    (dict(interval_steps=10_000), 'not below the budget'),
    (dict(fields=[('seed', ['0', '1'])], ranges={}), 'nothing to perturb'),
])
def test_bad_settings_are_one_line(kwargs, expected):
  with pytest.raises(errors.LaunchError, match=expected):
    _settings(**kwargs)


@pytest.mark.parametrize('field', [
    'network.policy_layers', 'num_actors', 'envs_per_actor', 'inference',
    'resources.learner.num_devices', 'env_name', 'max_actor_steps',
    'ppo.unroll_length', 'ppo.batch_size', 'r2d2.sequence_length',
    'checkpoint.interval_minutes'])
def test_fields_that_set_shapes_or_nodes_are_refused(field):
  with pytest.raises(errors.LaunchError, match=f'{field} cannot be in'):
    population.check_space([(field, ['1', '2'])], 2)


def test_learning_fields_and_seeds_are_accepted_and_a_member_alone_is_not():
  population.check_space(FIELDS, 2)
  with pytest.raises(errors.LaunchError, match='a population of 1 member'):
    population.check_space(FIELDS, 1)


def test_segments_end_at_the_next_boundary_or_the_budget():
  assert population.segment_end(0, 2000, 5000) == 2000
  assert population.segment_end(2100, 2000, 5000) == 4000  # Went past one.
  assert population.segment_end(4000, 2000, 5000) == 5000


def test_a_resumed_member_past_a_boundary_not_compared_stops_there():
  # It reached 4,000 before a Ctrl-C; the population was compared at
  # 2,000 only: it trains no further and is compared at 4,000 on its
  # 4,000 score, not at 4,000 on a 6,000 one.
  assert population.segment_end(4000, 2000, 9000, compared=2000) == 4000
  assert population.segment_end(4100, 2000, 9000, compared=2000) == 4000
  assert population.segment_end(2100, 2000, 9000, compared=0) == 2000
  # Compared at its last boundary: the next segment, as before.
  assert population.segment_end(4000, 2000, 9000, compared=4000) == 6000
  assert population.segment_end(2100, 2000, 9000, compared=2000) == 4000


def test_tunes_perturbations_stay_inside_the_ranges():
  from ray.tune.schedulers.pbt import _explore
  settings = _settings()
  scheduler = population.make(settings, lambda *args: None)
  mutations = scheduler._hyperparam_mutations
  random.seed(0)
  config = {'point': 'p', 'values': population.member_values(
      {'ppo.learning_rate': 0.0099, 'ppo.num_epochs': 1,
       'ppo.entropy_cost': 0.01}, settings['space'])}
  assert config['values']['ppo.entropy_cost'] == '0.01'  # The list's text.
  for _ in range(200):
    config, _ = _explore(config, mutations, 0.25, (1.2, 0.8),
                         scheduler._custom_explore_fn)
    values = config['values']
    assert 1e-4 <= values['ppo.learning_rate'] <= 1e-2
    assert values['ppo.num_epochs'] in (1, 2, 3, 4)
    assert values['ppo.entropy_cost'] in ('0.0', '0.01')
  assert population.flags(config['values'])[0].startswith(
      '--config.ppo.learning_rate=')


def test_a_change_is_told_field_by_field():
  assert population.describe_change(
      {'a': 0.0003, 'b': 2}, {'a': 0.00036, 'b': 2}) == 'a 0.0003 -> 0.00036; b 2'


def _launch(end, rate, started, copied=None, retried=False):
  """One segment's launch of a member taking turns."""
  return {'segment_end': end, 'values': {'ppo.learning_rate': rate},
          'started': started, 'retried': retried,
          'copied': copied and {'point': copied[0], 'actor_steps': copied[1],
                                'at': started - 1}}


def test_a_members_schedule_follows_what_it_copied():
  # Taking turns: b copied a at the 1,000 boundary, a copied b at 2,000
  # (each donor 40 steps past the boundary when it stopped there).
  record = {'points': [
      {'name': 'a', 'launches': [_launch(1000, 0.1, 10), _launch(2000, 0.1, 20),
                                 _launch(3000, 0.2, 30, copied=('b', 2040))]},
      {'name': 'b', 'launches': [_launch(1000, 0.3, 10),
                                 _launch(2000, 0.3, 20, copied=('a', 1040)),
                                 _launch(2000, 0.3, 25, retried=True),
                                 _launch(3000, 0.4, 31)]}]}
  assert population.schedule(record, 'b') == [(1000, {'ppo.learning_rate': 0.1}),
                                               (2000, {'ppo.learning_rate': 0.3}),
                                               (3000, {'ppo.learning_rate': 0.4})]
  assert population.schedule(record, 'a') == [(1000, {'ppo.learning_rate': 0.1}),
                                               (2000, {'ppo.learning_rate': 0.3}),
                                               (3000, {'ppo.learning_rate': 0.2})]


def test_a_members_schedule_keeps_a_copy_whose_launch_failed_and_ran_again():
  # Taking turns: b copied a at the 1,000 boundary, and that launch failed
  # (--trial_retries): its retry goes on from the copied learner and says
  # it copied nothing (trials.MemberTrial: a launch names only the copy it
  # applied). b's learner is still a's until the copy.
  record = {'points': [
      {'name': 'a', 'launches': [_launch(1000, 0.1, 10), _launch(2000, 0.1, 20),
                                 _launch(3000, 0.1, 30)]},
      {'name': 'b', 'launches': [_launch(1000, 0.3, 10),
                                 _launch(2000, 0.12, 20, copied=('a', 1040),
                                         retried=True),
                                 _launch(2000, 0.12, 25),
                                 _launch(3000, 0.12, 31)]}]}
  assert population.schedule(record, 'b') == [
      (1000, {'ppo.learning_rate': 0.1}), (3000, {'ppo.learning_rate': 0.12})]


def test_a_schedule_of_members_running_through_ends_each_launch_at_the_next():
  # Running through to 4,000: b stopped at 2,300 steps to copy a, which had
  # 2,500 then; a launch killed with the launcher went on resumed.
  def through(start, rate, started, copied=None):
    return {'from_steps': start, 'until': 4000, 'started': started,
            'values': {'ppo.learning_rate': rate},
            'copied': copied and {'point': copied[0], 'actor_steps': copied[1],
                                  'at': started - 1}}
  record = {'points': [
      {'name': 'a', 'launches': [through(0, 0.1, 10), through(3100, 0.1, 60)]},
      {'name': 'b', 'launches': [through(0, 0.0, 10),
                                 through(2300, 0.12, 40, copied=('a', 2500)),
                                 through(3000, 0.12, 60)]}]}
  assert population.schedule(record, 'b') == [(2500, {'ppo.learning_rate': 0.1}),
                                               (4000, {'ppo.learning_rate': 0.12})]
  assert population.schedule(record, 'a') == [(4000, {'ppo.learning_rate': 0.1})]


def test_a_value_brought_back_into_its_range_stays_there_when_rounded():
  space = {'ppo.learning_rate': {'kind': 'loguniform', 'low': 1e-5,
                                 'high': 0.00123456},
           'ppo.num_epochs': {'kind': 'int', 'low': 1, 'high': 4}}
  clipped = population.clip({'ppo.learning_rate': 0.0015,
                             'ppo.num_epochs': 5}, space)
  assert clipped == {'ppo.learning_rate': 0.00123456, 'ppo.num_epochs': 4}
  assert population.clip({'ppo.learning_rate': 0.000123456789},
                         space) == {'ppo.learning_rate': 0.0001235}


def test_a_resumed_members_values_are_those_of_an_exploit_staged_for_it(
    tmp_path):
  from acme_launch.sweep import trials
  run_dir, donor = tmp_path / 'member', tmp_path / 'donor_checkpoint'
  (donor / 'learner').mkdir(parents=True)
  (donor / 'learner' / 'ckpt-1.index').write_text('')
  recorded = {'learning_rate': 0.001}
  # Nothing staged: the values the record holds.
  assert trials.first_values(str(run_dir), recorded) == recorded
  run_dir.mkdir()
  trials.stage_exploit(str(run_dir), str(donor), 'donor', 2000,
                       {'learning_rate': 0.0012}, recorded)
  # Staged before the stop, applied at the member's next start: Tune's
  # copy of its values (which a later copy from it perturbs) is those.
  assert trials.first_values(str(run_dir), recorded) == {
      'learning_rate': 0.0012}


def test_an_exploit_from_a_member_with_no_learner_save_yet_does_not_raise(
    tmp_path):
  # Tune's scheduler callback stages it: a raise there aborts the sweep.
  from acme_launch.sweep import trials
  run_dir, donor = tmp_path / 'member', tmp_path / 'donor_checkpoint'
  own = run_dir / 'checkpoints' / 'learner'
  own.mkdir(parents=True)
  (own / 'ckpt-1.index').write_text('own')
  donor.mkdir()  # Its member.json only: no learner saved yet.
  trials.stage_exploit(str(run_dir), str(donor), 'donor', 2000,
                       {'learning_rate': 0.0012}, {'learning_rate': 0.001})
  staged = trials.apply_staged_exploit(str(run_dir))
  assert staged['values'] == {'learning_rate': 0.0012}
  assert staged['learner_copied'] is False
  assert (own / 'ckpt-1.index').read_text() == 'own'  # Kept, not lost.


def test_a_copy_from_a_member_on_a_ray_cluster_does_not_wait_for_a_save(
    tmp_path):
  # Its learner runs on another host, which may not share this one's file
  # system: a save request there is never seen, and the copy runs in
  # Tune's driver. It copies the latest periodic save at once.
  import subprocess
  import time
  from acme_launch.sweep import slots
  from acme_launch.sweep import trials
  member = object.__new__(trials.MemberTrial)  # Its copy only: no program.
  member._run_dir = str(tmp_path / 'member')
  member._name, member._values, member._frozen = 'member', {}, None
  member._slot = slots.Slot(0, (0,), (), '127.0.0.1:6379')
  learner = tmp_path / 'member' / 'checkpoints' / 'learner'
  learner.mkdir(parents=True)
  (learner / 'ckpt-1.index').write_text('periodic')
  member._popen = subprocess.Popen(['sleep', '30'])
  try:
    started = time.time()
    member.save_checkpoint(str(tmp_path / 'copy'))
    assert time.time() - started < 5
  finally:
    member._popen.kill()
    member._popen.wait()
  assert (tmp_path / 'copy' / 'learner' / 'ckpt-1.index').read_text() == (
      'periodic')


# Populations in real Tune on the sweep's own Ray, their members stand-ins
# (tests/sweep/tune_members.py), all run in one process (one Ray start).
# Short: members that end short of a boundary, taking turns on one slot
# and running through, frozen at the boundary.
SHORT = [{'scores': {'a': 1.0, 'b': 2.0, 'c': 3.0, 'd': 4.0},
          'fails': {'c': 'raises', 'd': 'ends'}, 'interval': 1000,
          'budget': 2000},
         {'scores': {'a': 1.0, 'b': 2.0, 'c': 3.0},
          'fails': {'c': 'raises'}, 'interval': 1000, 'budget': 2000,
          'through': True}]
# Resumed: the launcher stopped (Ctrl-C or kill -9) after a reached 2,000
# and before the comparison there (compared at 1,000); c had failed past
# its retries at 500, before 1,000, and was compared there without it.
# Taking turns, and running through.
RESUMED = [{'scores': {'a': 1.0, 'c': 2.0}, 'fails': {}, 'interval': 1000,
            'budget': 3000, 'compared': 1000, 'steps': {'a': 2000, 'c': 500},
            'through': through} for through in (False, True)]


@pytest.fixture(scope='module')
def told():
  """What Tune and the scheduler told of each population: {index: lines}."""
  import json
  import subprocess
  import sys
  from tests.conftest import REPO_ROOT, user_env
  try:
    result = subprocess.run(
        [sys.executable, '-m', 'tests.sweep.tune_members',
         json.dumps(SHORT + RESUMED)], cwd=REPO_ROOT, env=user_env(),
        capture_output=True, text=True, timeout=600, check=False)
  except subprocess.TimeoutExpired as e:
    raise AssertionError('Tune waited for ever:\n' +
                         (e.stdout or b'').decode()) from None
  assert result.returncode == 0, result.stderr[-3000:]
  lines = [json.loads(l) for l in result.stdout.splitlines()
           if l.startswith('{')]
  return {i: [l for l in lines if l['population'] == i]
          for i in range(len(SHORT + RESUMED))}


def test_members_waiting_at_a_boundary_go_on_when_others_end_short_of_it(
    told):
  # Taking turns on one slot: a and b reach the boundary and wait there
  # paused; c fails past its retries (its trial errors: Tune keeps it
  # among its live trials), then d, the last to run before the boundary,
  # ends as a restart that exits 2 does (its trial ends). Running through,
  # frozen at the boundary: a and b wait there while c fails. Tune's own
  # PBT would wait for them for ever; the population is compared without
  # them, naming them, and goes on to the budget.
  for index, spec in enumerate(SHORT):
    said = told[index]
    events = [(t.get('event'), t.get('point')) for t in said]
    short = sorted(spec['fails'])
    gone = [events.index(('error' if how == 'raises' else 'ended', name))
            for name, how in sorted(spec['fails'].items())]
    # They ended after a and b reached the boundary: a and b waited.
    assert {p for e, p in events[:min(gone)] if e == 'segment'} == {'a', 'b'}
    [left] = [t for t in said if t.get('event') == 'left_out']
    assert (left['steps'], left['members']) == (1000, short)
    assert [t['steps'] for t in said if t.get('event') == 'compared'] == [
        0, 1000]
    exploits = [t for t in said if t.get('event') == 'exploit']
    assert [(e['member'], e['copied']) for e in exploits] == [('a', 'b')]
    # The comparison is recorded once each of its exploits is (a --resume
    # after a stop in between compares there again: trials.undo_exploits).
    assert events.index(('exploit', None)) < len(events) - 1 - events[
        ::-1].index(('compared', None))
    # Then a and b went on to the budget.
    assert sorted(p for e, p in events[max(gone) + 1:] if e == 'ended') == [
        'a', 'b']
    assert said[-1]['ended']


@pytest.mark.parametrize('index', range(len(RESUMED)),
                         ids=['taking turns', 'through'])
def test_a_resumed_population_is_compared_where_it_stopped_on_the_same_scores(
    told, index):
  # Resumed: a reports 2,000 again (taking turns, its first segment ends
  # there, not at 3,000; running through, its score at 2,000) on the same
  # score (2.0), and waits there while c goes on from its own 500 steps;
  # the population is compared at 2,000 with both in it (a copies c, 4.0
  # there), not at 1,000 again nor first at 3,000; both reach the budget.
  said = told[len(SHORT) + index]
  segments = [(t['point'], t['steps']) for t in said
              if t.get('event') == 'segment']
  firsts = {}
  for point, steps in segments:
    firsts.setdefault(point, steps)
  assert firsts == {'a': 2000, 'c': 1000 if index == 0 else 2000}
  assert [t['steps'] for t in said if t.get('event') == 'compared'] == [
      1000, 2000]
  assert not [t for t in said if t.get('event') == 'left_out']
  exploits = [(t['member'], t['copied'], t['steps']) for t in said
              if t.get('event') == 'exploit']
  assert exploits == [('a', 'c', 2000)]  # c's score there: it was in.
  assert sorted(t['point'] for t in said if t.get('event') == 'ended') == [
      'a', 'c']
  assert said[-1]['ended']


def _stopped_population(tmp_path, compared, exploits, staged=(), part=()):
  """A population's sweep directory as a stop left it: sweep.json with
  the last comparison recorded and the exploits recorded; a copy staged
  in each member of `staged` ((member, donor, donor's steps)), one cut
  short in each of `part`."""
  from acme_launch.sweep import trials
  donor = tmp_path / 'donor_checkpoint'
  (donor / 'learner').mkdir(parents=True)
  (donor / 'learner' / 'ckpt-1.index').write_text('donor')
  record = {'points': [{'name': n, 'launches': []} for n in 'abcd'],
            'population': {'compared': compared, 'exploits': [
                {'actor_steps': at, 'member': m, 'copied': d,
                 'copied_steps': steps, 'before': {}, 'after': {'lr': 0.2}}
                for at, m, d, steps in exploits]}}
  for name in 'abcd':
    (tmp_path / name).mkdir()
  for member, copied, steps in staged:
    trials.stage_exploit(str(tmp_path / member), str(donor), copied, steps,
                         {'lr': 0.2}, {'lr': 0.1})
  for member in part:  # Killed while it copied the donor's learner.
    (tmp_path / member / 'exploit.part' / 'learner').mkdir(parents=True)
  return record


def test_a_comparison_stopped_before_it_was_recorded_is_made_again(tmp_path):
  # Killed at the comparison at 2,000: b's copy of a staged and recorded,
  # c's staged only, d's cut short; the comparison not recorded (compared
  # 1,000). On --resume none of them is made: the members are compared at
  # 2,000 again. The copy decided at 1,000 and not applied yet is kept.
  from acme_launch.sweep import trials
  record = _stopped_population(
      tmp_path, 1000, [(1000, 'a', 'd', 1040), (2000, 'b', 'a', 2030)],
      staged=[('a', 'd', 1040), ('b', 'a', 2030), ('c', 'a', 2030)],
      part=['d'])
  assert sorted(trials.undo_exploits(str(tmp_path), record)) == ['b', 'c']
  first, second = record['population']['exploits']
  assert 'dropped' not in first and 'compared there again' in second[
      'dropped']
  assert trials.staged_exploit(str(tmp_path / 'a'))['point'] == 'd'
  for name in 'bcd':
    assert not os.listdir(tmp_path / name), name
  # Recorded as a whole, the comparison's copies all stay.
  record = _stopped_population(tmp_path / 'recorded', 2000,
                               [(2000, 'b', 'a', 2030)],
                               staged=[('b', 'a', 2030)])
  assert trials.undo_exploits(str(tmp_path / 'recorded'), record) == []
  assert trials.first_values(str(tmp_path / 'recorded' / 'b'),
                             {'lr': 0.1}) == {'lr': 0.2}
