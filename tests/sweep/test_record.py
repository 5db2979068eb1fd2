"""The sweep record: sweep.json keeps an MLflow URI masked; the table
gives interval estimates per setting and names what it cannot read."""

import os

from acme_launch import layout
from acme_launch.stats import library as stats
from acme_launch.sweep import record as sweep_record
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.points import Point
from acme_launch.testing import sweep_dirs


def test_the_record_keeps_the_tracking_uri_masked_and_no_flag_of_it(tmp_path):
  options = SweepOptions(
      sweep_dir=str(tmp_path / 'sweep'), resume=False,
      base_argv=('--config=smoke', '--tracking=mlflow'),
      tracking_uri='http://alice:s3cret@127.0.0.1:5000')
  point = Point('seed=0', (('seed', 0),), ('--config.seed=0',), 1000, False)
  record = sweep_record.new_record(options, [point], ['seed'])
  assert record['tracking_uri'] == 'http://alice:***@127.0.0.1:5000'
  assert 's3cret' not in repr(record)
  args = sweep_record.point_args(options.sweep_dir, record, point, 'new')
  assert not any(a.startswith('--tracking_uri') for a in args)
  plain = sweep_record.new_record(
      SweepOptions(sweep_dir=options.sweep_dir, resume=False), [point], ['seed'])
  assert 'tracking_uri' not in plain


def _table(sweep_dir):
  table = sweep_record.summarize(sweep_dir, sweep_record.read_record(sweep_dir))
  return table, sweep_record.format_table(table)


def test_each_setting_gets_iqm_median_and_mean_with_intervals(tmp_path):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5200, 4800, 1000],
                                     '0.0003': [4000, 4100, 4200, 4300]})
  table, text = _table(sweep_dir)
  first, second = table['settings']
  assert first['setting'] == 'ppo.learning_rate=0.001' and first['runs'] == 4
  assert first['final_return_mean'] == 4000.0  # Kept beside the new keys.
  intervals = first['final_return_intervals']
  assert intervals['iqm']['value'] == 4900.0  # (4,800 + 5,000) / 2.
  assert intervals['median']['value'] == 4900.0
  assert intervals['mean'] == stats.interval_estimates(
      [5000, 5200, 4800, 1000])['mean']
  assert intervals['iqm']['low'] < 4900.0 < intervals['iqm']['high']
  assert second['final_return_intervals']['iqm'] == {
      'value': 4150.0, 'low': 4000.0, 'high': 4300.0}
  assert first['interval']['confidence'] == 0.95
  assert ('ppo.learning_rate=0.0003            4  IQM 4,150.0 [4,000.0, '
          '4,300.0]; median 4,150.0 [4,000.0, 4,300.0]; mean 4,150.0 '
          '[4,050.0, 4,250.0]') in text.splitlines()
  assert 'final return mean +- std' in text and 'no interval' not in text
  assert table['notes'] == []


def test_one_run_per_setting_gets_points_and_a_line_saying_no_interval(tmp_path):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000], '0.0003': [4000]})
  table, text = _table(sweep_dir)
  assert table['settings'][0]['final_return_intervals']['iqm'] == {
      'value': 5000.0, 'low': None, 'high': None}
  assert text.splitlines()[-1] == (
      'fewer than two runs in ppo.learning_rate=0.001, ppo.learning_rate=0.0003:'
      ' no interval can be given, point estimates only')
  assert 'IQM 5,000.0; median 5,000.0; mean 5,000.0' in text


def test_a_missing_or_damaged_summary_is_named_and_the_rest_reported(tmp_path):
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(
      sweep_dir, {'0.001': [5000, 5200, 4800], '0.0003': [4000, 4100, None]})
  with open(os.path.join(sweep_dir, names[1], 'summary.json'), 'w') as f:
    f.write('{"exit_reason": "budg')
  os.remove(os.path.join(sweep_dir, names[2], 'summary.json'))
  table, text = _table(sweep_dir)
  damaged = os.path.join(sweep_dir, names[1], 'summary.json')
  assert table['notes'] == [
      f'{names[1]}: {damaged} is unreadable (damaged or a link)',
      f'{names[2]}: no summary.json in {os.path.join(sweep_dir, names[2])}']
  assert text.splitlines()[-2:] == table['notes']
  # The point never started (no run directory) is no note; the rest counts.
  first, second = table['settings']
  assert first['returns'] == [5000] and second['returns'] == [4000, 4100]
  assert second['final_return_intervals']['mean']['low'] == 4000.0
  assert 'fewer than two runs in ppo.learning_rate=0.001:' in text


def test_a_resume_ends_the_open_launches_whose_programs_wrote_their_end(
    tmp_path):
  # Three points whose sweep launcher was killed with their launches open:
  # one program reached its budget after the kill (its summary newer than
  # the launch), one was killed with it (its summary older: a previous
  # launch's), one wrote none.
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 4000, None]})
  record = sweep_record.read_record(sweep_dir)
  summaries = [os.path.join(sweep_dir, n, 'summary.json') for n in names[:2]]
  written = os.path.getmtime(summaries[0])
  os.utime(summaries[1], (written - 100, written - 100))
  for entry in record['points']:
    entry['launches'] = [{'started': written - 50, 'ended': None,
                          'exit_code': None, 'exit_reason': None}]
  assert sweep_record.close_open_launches(sweep_dir, record) == [names[0]]
  done, killed, new = (e['launches'][-1] for e in record['points'])
  assert done == {'started': written - 50, 'ended': written,
                  'exit_code': None, 'exit_reason': 'budget_reached'}
  assert killed['ended'] is None and killed['exit_reason'] is None
  assert new['ended'] is None
  # Ended launches stay as they are.
  assert sweep_record.close_open_launches(sweep_dir, record) == []


def _fail(sweep_dir, name, last_return, steps, budget=1000):
  """Makes a point's run one that ended without reaching its budget."""
  run_dir = os.path.join(sweep_dir, name)
  os.remove(layout.final_eval_path(run_dir))
  layout.write_json_atomic(layout.summary_path(run_dir), {
      'exit_reason': 'node_failed', 'failed_node': 'actor/0',
      'max_actor_steps': budget, 'actor_steps': steps,
      'final_eval_return_mean': None, 'last_eval_return': last_return,
      'last_eval_actor_steps': steps, 'wall_time_seconds': 3.0})


def test_a_point_short_of_its_budget_is_failed_with_its_last_return_apart(
    tmp_path):
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5100, 4000]})
  _fail(sweep_dir, names[2], -50.0, 120)
  table, text = _table(sweep_dir)
  setting, = table['settings']
  assert setting['returns'] == [5000, 5100] and setting['runs'] == 2
  assert setting['final_return_intervals']['iqm']['low'] == 5000.0
  assert table['failed'] == [names[2]]
  row = table['points'][2]
  assert row['final_return'] is None and not row['budget_reached']
  assert (row['last_return'], row['last_return_actor_steps']) == (-50.0, 120)
  assert '5050.0 +- 50.0 (2 of 3 points)' in text
  assert table['points'][1]['last_return'] == 2550.0  # Its mid-run one.
  assert (f'{names[2]} did not reach its budget (node_failed): last return '
          '-50.0 at 120 of 1,000 actor steps') in text.splitlines()


def _population(sweep_dir, finals, segment_ends):
  """A population's record whose members' summaries end where given (the
  end of a segment taking turns, or the budget)."""
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': finals})
  record = sweep_record.read_record(sweep_dir)
  record['scheduler'] = {'name': 'pbt'}
  for entry, end in zip(record['points'], segment_ends):
    path = layout.summary_path(os.path.join(sweep_dir, entry['name']))
    summary = layout.read_json(path)
    summary.update(max_actor_steps=end, actor_steps=end,
                   last_eval_actor_steps=end)
    layout.write_json_atomic(path, summary)
    entry['values'] = {'ppo.learning_rate': 0.001}
  layout.write_json_atomic(sweep_record.record_path(sweep_dir), record)
  return names


def test_a_member_at_a_segments_end_short_of_its_budget_is_not_finished(
    tmp_path):
  # Taking turns, each segment ends `budget_reached` at the segment's end:
  # the third member stopped at 500 of its 1,000 with the best return.
  sweep_dir = str(tmp_path / 'sweep')
  names = _population(sweep_dir, [10.0, 20.0, 30.0], [1000, 1000, 500])
  table, text = _table(sweep_dir)
  assert table['failed'] == [names[2]]
  assert table['population']['best'] == names[1]
  assert table['population']['best_return'] == 20.0
  assert table['settings'][0]['returns'] == [10.0, 20.0]
  assert table['points'][2]['final_return'] is None
  assert table['points'][2]['exit_reason'] == 'segment_end'
  assert (f'{names[2]} did not reach its budget (segment_end): last '
          'return 15.0 at 500 of 1,000 actor steps') in text.splitlines()


def test_a_row_torn_by_a_kill_and_appended_to_on_resume_is_skipped_and_noted(
    tmp_path):
  from acme_launch.program import nodes
  from acme_launch.run import summary as summary_lib
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5100]})
  run_dir = os.path.join(sweep_dir, names[0])
  path = layout.metrics_path(run_dir, 'evaluator/0')
  os.remove(path)
  logger = nodes.MetricsLogger(run_dir, 'evaluator/0')
  for steps in (250, 500):
    logger.write({'actor_steps': steps, 'episode_return': steps / 10})
  logger.close()
  with open(path, 'rb') as f:
    last_row = f.read().rindex(b'\n500,')
  os.truncate(path, last_row + len('\n500,5'))  # Killed mid-row.
  resumed = nodes.MetricsLogger(run_dir, 'evaluator/0')
  resumed.write({'actor_steps': 750, 'episode_return': 75.0})
  resumed.close()
  rows = summary_lib.evaluation_rows(run_dir)
  assert [(r['actor_steps'], r['episode_return']) for r in rows] == [
      (250, 25.0), (750, 75.0)]
  table, text = _table(sweep_dir)
  note = (f'{names[0]}: 1 torn row of metrics/evaluator_0.csv skipped (cut '
          'by a kill)')
  assert table['notes'] == [note] and note in text.splitlines()
  assert table['settings'][0]['returns'] == [5000, 5100]


def test_a_populations_figures_have_no_interval_its_members_copy_each_other(
    tmp_path):
  sweep_dir = str(tmp_path / 'sweep')
  _population(sweep_dir, [10.0, 20.0, 30.0, 40.0], [1000] * 4)
  table, text = _table(sweep_dir)
  population, = table['settings']
  assert population['final_return_intervals'] == {
      name: {'value': 25.0, 'low': None, 'high': None}
      for name in ('iqm', 'median', 'mean')}
  assert 'interval' not in population
  assert ('population                         4  IQM 25.0; median 25.0; '
          'mean 25.0') in text.splitlines()
  assert ('no interval over a population: members that copy one another '
          'are not independent runs') in text.splitlines()
