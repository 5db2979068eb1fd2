"""Random search's draws (sweep/sample.py), in process: the real parser, the
real config and the real checks of each point, no program started."""

import os
import re

import pytest

from acme_launch import cli
from acme_launch import errors
from acme_launch import layout
from acme_launch.configs import smoke
from acme_launch.sweep import points as sweep_points
from acme_launch.sweep import record as sweep_record
from acme_launch.sweep import options as sweep_options
from acme_launch.sweep import plan
from acme_launch.sweep import sample
from tests.conftest import REPO_ROOT

SPECS = ('ppo.learning_rate=loguniform(1e-5,1e-3);ppo.num_epochs=int(1,3)',
         'ppo.discount=uniform(0.99,0.999)', 'seed=0,1,2')


def _draw(specs, samples, seed):
  fields = sweep_points.parse_specs(specs)
  return fields, sample.draw(fields, sample.parse_ranges(fields), samples, seed)


def test_draws_fall_within_their_ranges_and_lists_and_are_distinct():
  fields, drawn = _draw(SPECS, 500, seed=0)
  assert [f for f, _ in fields] == ['ppo.learning_rate', 'ppo.num_epochs',
                                    'ppo.discount', 'seed']
  assert len(set(drawn)) == 500
  rates = [float(p[0]) for p in drawn]
  epochs = [int(p[1]) for p in drawn]   # int() of a float text would fail.
  discounts = [float(p[2]) for p in drawn]
  assert all(1e-5 <= r <= 1e-3 for r in rates)
  assert all(0.99 <= d <= 0.999 for d in discounts)
  assert set(epochs) == {1, 2, 3}       # Both bounds of int() are drawn.
  assert {p[3] for p in drawn} == {'0', '1', '2'}
  # loguniform: each decade of the range about half the draws.
  low_decade = sum(r < 1e-4 for r in rates)
  assert 175 < low_decade < 325, low_decade
  # uniform: each half of the range about half the draws.
  assert 175 < sum(d < 0.9945 for d in discounts) < 325
  # Short texts: 4 significant digits (loguniform); steps of 1e-7, under
  # 1/10,000 of uniform's width of 9e-3.
  assert all(float(f'{r:.4g}') == r for r in rates)
  assert all(round(d, 7) == d for d in discounts)
  assert len(set(discounts)) > 490


def test_a_range_narrower_than_its_rounding_keeps_its_values_inside():
  _, drawn = _draw(['ppo.learning_rate=loguniform(0.123449,0.12345)'], 50, 3)
  assert all(0.123449 <= float(v) <= 0.12345 for (v,) in drawn)
  _, drawn = _draw(['ppo.discount=uniform(0.3,0.30000001)'], 50, 3)
  assert all(0.3 <= float(v) <= 0.30000001 for (v,) in drawn)


def test_draws_repeat_with_their_seed_and_differ_with_another():
  _, first = _draw(SPECS, 20, seed=0)
  _, again = _draw(SPECS, 20, seed=0)
  _, other = _draw(SPECS, 20, seed=1)
  assert first == again
  assert other != first and not set(other) & set(first)


def test_lists_alone_draw_distinct_points_up_to_their_product():
  _, drawn = _draw(['seed=0,1', 'ppo.num_epochs=int(1,2)'], 4, seed=0)
  assert sorted(drawn) == [('0', '1'), ('0', '2'), ('1', '1'), ('1', '2')]
  with pytest.raises(errors.LaunchError, match='give only 4 distinct points'):
    _draw(['seed=0,1', 'ppo.num_epochs=int(1,2)'], 5, seed=0)


@pytest.mark.parametrize('spec, expected', [
    ('ppo.learning_rate=uniform(1e-3,1e-5)', 'an empty range'),
    ('ppo.num_epochs=int(2,2)', 'an empty range'),
    ('ppo.learning_rate=loguniform(0,1e-3)', 'loguniform needs LOW > 0'),
    ('ppo.learning_rate=uniform(1e-5,inf)', 'bounds must be finite'),
    ('ppo.num_epochs=int(1,2.5)', 'takes two integers'),
    ('ppo.learning_rate=uniform(1e-5)', 'takes two numbers'),
    ('ppo.learning_rate=gauss(0,1)', 'unknown distribution gauss'),
    ('ppo.learning_rate=uniform(0,1),0.5', "a range is its field's only value"),
])
def test_bad_ranges_are_refused(spec, expected):
  with pytest.raises(errors.LaunchError, match=expected):
    sample.parse_ranges(sweep_points.parse_specs([spec]))


def _options(tmp_path, specs, samples, seed=0, resume=False):
  return sweep_options.SweepOptions(
      sweep_dir=str(tmp_path / 'drawn'), resume=resume, specs=tuple(specs),
      base_argv=('--config=smoke',), config_name='smoke', max_concurrent=1,
      cwd=REPO_ROOT, samples=samples, sample_seed=seed)


def test_drawn_points_have_their_fields_types_and_a_resumed_sweep_keeps_them(
    tmp_path):
  config = smoke.get_config()
  options = _options(tmp_path, SPECS[:1], samples=3)
  record, todo, _ = plan.prepare(options, cli._check_sweep_point, config)
  points = [p for p, _ in todo]
  assert len(points) == 3 and len({p.name for p in points}) == 3
  for point in points:
    fields = dict(point.fields)
    # As the config reads each flag: a float field a float, an int field an int.
    assert type(fields['ppo.learning_rate']) is float
    assert type(fields['ppo.num_epochs']) is int
    assert 1e-5 <= fields['ppo.learning_rate'] <= 1e-3
    assert 1 <= fields['ppo.num_epochs'] <= 3
    assert point.name == sweep_points.safe_name(
        f'ppo.learning_rate={fields["ppo.learning_rate"]},'
        f'ppo.num_epochs={fields["ppo.num_epochs"]}')
  assert record['random_search'] == {'samples': 3, 'seed': 0,
                                     'specs': list(SPECS[:1])}

  # The record as the sweep writes it; --resume reads its points back and
  # draws none, whatever seed or samples it would be given.
  os.makedirs(options.sweep_dir)
  layout.write_json_atomic(sweep_record.record_path(options.sweep_dir), record)
  resumed = _options(tmp_path, (), samples=0, seed=5, resume=True)
  _, todo_again, _ = plan.prepare(resumed, cli._check_sweep_point)
  assert [p for p, _ in todo_again] == points

  # Another seed, another sweep: other points.
  other = _options(tmp_path / 'other', SPECS[:1], samples=3, seed=1)
  _, other_todo, _ = plan.prepare(other, cli._check_sweep_point, config)
  assert not {p.name for p, _ in other_todo} & {p.name for p in points}


@pytest.mark.parametrize('spec, expected', [
    ('ppo.num_epochs=uniform(1,4)', 'ppo.num_epochs is int in the config; '
     'give it int(LOW,HIGH)'),
    ('ppo.learning_rate=int(1,4)', 'ppo.learning_rate is float in the config'),
    ('ppo.normalize_rewards=int(0,1)', 'is bool in the config'),
    ('env_name=uniform(0,1)', 'is str in the config'),
    ('network.policy_layers=int(8,64)', 'is tuple in the config'),
])
def test_a_range_must_fit_its_fields_type(tmp_path, spec, expected):
  with pytest.raises(errors.LaunchError, match=re.escape(expected)):
    plan.prepare(_options(tmp_path, [spec], samples=2),
                   cli._check_sweep_point, smoke.get_config())
  assert not os.path.exists(tmp_path / 'drawn')


def test_without_sweep_samples_a_range_is_refused_and_lists_make_the_grid(
    tmp_path):
  with pytest.raises(errors.LaunchError, match='needs --sweep_samples=N'):
    plan.prepare(_options(tmp_path, SPECS, samples=0),
                   cli._check_sweep_point, smoke.get_config())
  record, todo, _ = plan.prepare(
      _options(tmp_path, ['ppo.num_epochs=1,2'], samples=0),
      cli._check_sweep_point, smoke.get_config())
  assert [p.name for p, _ in todo] == ['ppo.num_epochs=1', 'ppo.num_epochs=2']
  assert 'random_search' not in record


@pytest.mark.parametrize('seed', range(3))
def test_a_space_of_ints_and_lists_is_drawn_whole_without_replacement(seed):
  _, drawn = _draw(['seed=int(0,299)'], 300, seed)
  assert sorted(int(v) for (v,) in drawn) == list(range(300))
  _, drawn = _draw(['seed=0,1,2', 'ppo.num_epochs=int(1,4)'], 12, seed)
  assert len(set(drawn)) == 12
  assert _draw(['seed=int(0,299)'], 20, seed) == _draw(['seed=int(0,299)'],
                                                        20, seed)
