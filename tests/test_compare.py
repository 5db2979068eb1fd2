"""`python -m acme_launch.compare`: P(A > B) with its interval between the
groups of a sweep or two lists of run directories, and what else differs."""

import os

import pytest

from acme_launch import compare
from acme_launch import layout
from acme_launch.stats import library as stats
from acme_launch.sweep import record as sweep_record
from acme_launch.testing import sweep_dirs

LR = 'ppo.learning_rate'


def _run(argv, capsys):
  code = compare.main(argv)
  out, err = capsys.readouterr()
  return code, out, err


def test_a_sweep_compared_by_its_field(tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5200, 4800, 1000],
                                     '0.0003': [4000, 4100, 4200, 4300]})
  code, out, err = _run([sweep_dir, f'--field={LR}'], capsys)
  assert code == 0 and not err
  value, low, high = stats.probability_of_improvement(
      [5000, 5200, 4800, 1000], [4000, 4100, 4200, 4300])
  assert value == 0.75  # 12 of 16 pairs: every run but the 1,000.
  assert (f'P({LR}=0.001 > {LR}=0.0003) = 0.75 [{low:.2f}, {high:.2f}]'
          in out.splitlines())
  assert f'{LR}=0.0003     4  IQM 4,150.0 [4,000.0, 4,300.0]' in out
  assert 'differ' not in out.split('cannot tell them apart.')[1]


def test_run_lists_name_the_config_fields_they_also_differ_in(tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(
      sweep_dir, {'0.001': [5000, 5200], '0.0003': [4000, 4100]},
      config={'0.001': {'ppo': {'entropy_cost': 0.0}},
              '0.0003': {'ppo': {'entropy_cost': 0.005}}})
  dirs = [os.path.join(sweep_dir, n) for n in names]
  code, out, _ = _run(['--a', *dirs[:2], '--b', *dirs[2:], f'--field={LR}'],
                      capsys)
  assert code == 0
  assert 'P(A > B) = 1.00 [1.00, 1.00]' in out
  assert out.splitlines()[-1] == (
      'the configs also differ in ppo.entropy_cost (A: 0.0; B: 0.005)')
  code, out, _ = _run(['--a', *dirs[:2], '--b', *dirs[2:]], capsys)
  assert out.splitlines()[-2:] == [
      'the configs also differ in ppo.entropy_cost (A: 0.0; B: 0.005)',
      f"the configs also differ in {LR} (A: '0.001'; B: '0.0003')"]


def test_a_missing_summary_is_named_and_the_rest_compared(tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5200],
                                             '0.0003': [4000, 4100]})
  os.remove(os.path.join(sweep_dir, names[3], 'summary.json'))
  code, out, _ = _run([sweep_dir, f'--field={LR}'], capsys)
  assert code == 0
  assert f'{names[3]}: no summary.json in' in out.splitlines()[-1]
  assert ('= 1.00 (fewer than two runs in a group: no interval can be given)'
          in out)


@pytest.mark.parametrize('argv, message', [
    (['SWEEP', '--field=ppo.entropy_cost'],
     'SWEEP sweeps ppo.learning_rate, seed, not ppo.entropy_cost'),
    (['SWEEP'], '--field: which swept field to compare by'),
    (['--a', 'SWEEP/nowhere', '--b', 'SWEEP/nor_here'],
     'fewer than two groups with a final return: A, B (SWEEP/nowhere: no '
     'such run directory)'),
    (['--a', 'SWEEP'], 'give a sweep directory, or --a RUN_DIR ... and --b '
     'RUN_DIR ...'),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5200]})
  argv = [a.replace('SWEEP', sweep_dir) for a in argv]
  code, out, err = _run(argv, capsys)
  assert code == 2 and not out
  assert err == (f'acme-launch compare: error: '
                 f'{message.replace("SWEEP", sweep_dir)}\n')


def test_a_sweep_of_more_fields_names_those_pooled(tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5200],
                                     '0.0003': [4000, 4100]})
  # A second swept field: seed 0 and 1 of each value differ in it too.
  record = sweep_record.read_record(sweep_dir)
  record['fields'].insert(1, 'ppo.entropy_cost')
  for point in record['points']:
    point['fields']['ppo.entropy_cost'] = point['fields']['seed'] * 0.005
  layout.write_json_atomic(sweep_record.record_path(sweep_dir), record)
  code, out, _ = _run([sweep_dir, f'--field={LR}'], capsys)
  assert code == 0
  assert out.splitlines()[-1] == (
      'pooled in each group: every value of ppo.entropy_cost (the groups '
      'differ in more than the compared fields)')
  code, out, _ = _run([sweep_dir, f'--field={LR}', '--field=ppo.entropy_cost'],
                      capsys)
  assert code == 0 and 'pooled' not in out
  rows = {l.split()[0]: l.split()[1:4] for l in out.splitlines()[1:5]}
  assert rows[f'{LR}=0.001,ppo.entropy_cost=0.005'] == ['1', 'IQM', '5,200.0;']
  assert rows[f'{LR}=0.0003,ppo.entropy_cost=0.0'] == ['1', 'IQM', '4,000.0;']


def test_a_run_short_of_its_budget_is_left_out_with_its_last_return(
    tmp_path, capsys):
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5100, 5200],
                                             '0.0003': [4000, 4100]})
  # A node failed at 120 of 1,000 steps, its last evaluation -50.
  path = layout.summary_path(os.path.join(sweep_dir, names[2]))
  layout.write_json_atomic(path, {
      **layout.read_json(path), 'exit_reason': 'node_failed',
      'actor_steps': 120, 'max_actor_steps': 1000,
      'final_eval_return_mean': None,
      'last_eval_return': -50.0, 'last_eval_actor_steps': 120})
  code, out, _ = _run([sweep_dir, f'--field={LR}'], capsys)
  assert code == 0
  assert f'{LR}=0.001      2  IQM 5,050.0 [5,000.0, 5,100.0]' in out
  assert out.splitlines()[-1] == (
      f'{os.path.join(sweep_dir, names[2])} did not reach its budget '
      '(node_failed): last return -50.0 at 120 of 1,000 actor steps')
  code, out, _ = _run(['--a', *(os.path.join(sweep_dir, n) for n in names[:3]),
                       '--b', *(os.path.join(sweep_dir, n) for n in names[3:])],
                      capsys)
  assert 'A         2  IQM 5,050.0' in out
  assert ('did not reach its budget (node_failed): last return -50.0 at 120 '
          'of 1,000 actor steps') in out


def test_a_listed_population_member_at_a_segments_end_is_not_finished(
    tmp_path, capsys):
  # A population's member taking turns ends each segment `budget_reached`
  # at that segment's budget (500 of its 1,000); given as a run directory,
  # its own budget is the one in its sweep's sweep.json.
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [5000, 5100, 9000],
                                             '0.0003': [4000, 4100]})
  record = sweep_record.read_record(sweep_dir)
  record['scheduler'] = {'name': 'pbt'}
  layout.write_json_atomic(sweep_record.record_path(sweep_dir), record)
  path = layout.summary_path(os.path.join(sweep_dir, names[2]))
  layout.write_json_atomic(path, {
      **layout.read_json(path), 'actor_steps': 500, 'max_actor_steps': 500,
      'last_eval_actor_steps': 500, 'last_eval_return': 9000.0})
  dirs = [os.path.join(sweep_dir, n) for n in names]
  code, out, _ = _run(['--a', *dirs[:3], '--b', *dirs[3:]], capsys)
  assert code == 0
  assert 'A         2  IQM 5,050.0' in out
  assert (f'{dirs[2]} did not reach its budget (segment_end): last return '
          '9000.0 at 500 of 1,000 actor steps') in out.splitlines()
