"""`python -m acme_launch.plot SWEEP_DIR`: the curves, the interval
estimates per setting and the performance profile, from a sweep's files."""

import os

from acme_launch import layout
from acme_launch import plot
from acme_launch.sweep import record as sweep_record
from acme_launch.testing import sweep_dirs

PNG = b'\x89PNG\r\n\x1a\n'
NAMES = ('eval_return.png', 'final_return_intervals.png',
         'performance_profile.png')


def _pngs(folder):
  found = {}
  for name in NAMES:
    path = os.path.join(folder, name)
    if os.path.isfile(path):
      with open(path, 'rb') as f:
        found[name] = f.read(8) == PNG
  return found


def test_a_sweep_gets_curves_intervals_and_profile(tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5200, 4800, 1000],
                                     '0.0003': [4000, 4100, 4200, 4300]})
  assert plot.main([sweep_dir]) == 0
  out, err = capsys.readouterr()
  plots = os.path.join(sweep_dir, 'plots')
  assert out.split() == [os.path.join(plots, n) for n in NAMES]
  assert _pngs(plots) == {n: True for n in NAMES} and not err


def test_one_run_per_setting_is_drawn_and_said_to_have_no_interval(
    tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 4000],
                                             '0.0003': [4000]})
  os.remove(os.path.join(sweep_dir, names[1], 'summary.json'))
  out = str(tmp_path / 'elsewhere')
  assert plot.main([sweep_dir, f'--out={out}']) == 0
  err = capsys.readouterr().err
  assert _pngs(out) == {n: True for n in NAMES}
  assert f'acme-launch plot: {names[1]}: no summary.json in' in err
  assert 'fewer than two runs per setting: no interval can be given' in err


def test_a_sweep_with_nothing_finished_is_one_line_and_exit_2(tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [None, None]})
  assert plot.main([sweep_dir]) == 2
  assert capsys.readouterr().err == (
      f'acme-launch plot: error: no point of {sweep_dir} has an evaluation '
      'yet\n')


def _drawn(monkeypatch):
  """The figures the plots make, kept open as they are written."""
  figures = []
  monkeypatch.setattr(plot.plt, 'close', figures.append)
  return figures


def test_a_population_gets_no_interval_or_band_over_its_members(
    tmp_path, capsys, monkeypatch):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [10.0, 20.0, 30.0, 40.0]})
  record = sweep_record.read_record(sweep_dir)
  record['scheduler'] = {'name': 'pbt'}
  for entry in record['points']:
    entry['values'] = {'ppo.learning_rate': 0.001}
  layout.write_json_atomic(sweep_record.record_path(sweep_dir), record)
  figures = _drawn(monkeypatch)
  assert plot.main([sweep_dir]) == 0
  assert ('acme-launch plot: no interval or band over a population: members '
          'that copy one another are not independent runs'
          in capsys.readouterr().err.splitlines())
  _, intervals, profile = figures
  assert not [p for a in intervals.axes for p in a.patches]  # No bars.
  assert not profile.axes[0].collections  # No band.
  assert len(profile.axes[0].lines) == 1


def test_a_plain_sweep_keeps_its_intervals_and_band(tmp_path, monkeypatch):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [10.0, 20.0, 30.0, 40.0]})
  figures = _drawn(monkeypatch)
  assert plot.main([sweep_dir]) == 0
  _, intervals, profile = figures
  assert len([p for a in intervals.axes for p in a.patches]) == 3
  assert len(profile.axes[0].collections) == 1


def test_a_run_with_a_progress_row_torn_by_a_kill_is_drawn(tmp_path, capsys):
  run_dir = str(tmp_path / 'run')
  sweep_dirs.write_run(run_dir, 100.0)
  # A kill cut the third row; the resumed counter went on on a new line.
  with open(os.path.join(run_dir, 'metrics', 'progress.csv'), 'w') as f:
    f.write('actor_steps,wall_time\n0,0.0\n100,1.0\n2\n300,3.0\n400,4.0\n')
  with open(os.path.join(run_dir, 'metrics', 'evaluator_0.csv'), 'a') as f:
    f.write('50,x\n')
  assert plot.main([run_dir]) == 0
  out, err = capsys.readouterr()
  assert out.split() == [os.path.join(run_dir, 'plots', n) for n in
                         ('eval_return.png', 'steps_per_second.png')]
  assert err.splitlines() == [
      'acme-launch plot: 1 torn row of metrics/evaluator_0.csv skipped (cut '
      'by a kill)',
      'acme-launch plot: 1 torn row of metrics/progress.csv skipped (cut by a '
      'kill)']
