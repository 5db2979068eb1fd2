"""sweep.json: an MLflow URI's credentials are never in it."""

from acme_launch.sweep import record as sweep_record
from acme_launch.sweep.options import SweepOptions
from acme_launch.sweep.points import Point


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
