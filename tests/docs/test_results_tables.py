"""docs/results.md's generated tables against the JSON they come from
(scripts/results_tables.py): a figure on the page cannot drift from its data."""

import importlib.util
import json
import os
import shutil

from tests.conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location(
    'results_tables', os.path.join(REPO_ROOT, 'scripts', 'results_tables.py'))
results_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results_tables)


def test_results_page_matches_its_json():
  printed = []
  assert results_tables.main(['--check'], write=printed.append) == 0, (
      '\n'.join(printed))


def test_every_table_is_on_the_page():
  with open(results_tables.PAGE) as f:
    page = f.read()
  for name in results_tables.TABLES:
    assert f'<!-- results-table: {name} -->' in page, name


def test_a_changed_figure_is_caught_and_rewritten(tmp_path):
  page = tmp_path / 'results.md'
  shutil.copy(results_tables.PAGE, page)
  text = page.read_text()
  assert '| 4,806 +- 430 |' in text
  page.write_text(text.replace('| 4,806 +- 430 |', '| 4,900 +- 430 |'))
  printed = []
  assert results_tables.main(['--check', f'--page={page}'],
                             write=printed.append) == 1
  assert '4,900 +- 430' in printed[0] and '4,806 +- 430' in printed[0]
  assert results_tables.main([f'--page={page}'], write=printed.append) == 0
  assert page.read_text() == text


def test_a_missing_data_file_is_one_line_and_exit_2(tmp_path, capsys):
  page = tmp_path / 'results.md'
  page.write_text('<!-- results-table: ppo_1m -->\n<!-- end -->\n')
  assert results_tables.main([f'--page={page}', f'--results={tmp_path}']) == 2
  assert 'ppo_1m_async.json' in capsys.readouterr().err


def test_an_unknown_table_or_an_open_marker_is_exit_2(tmp_path, capsys):
  page = tmp_path / 'results.md'
  page.write_text('<!-- results-table: nope -->\n<!-- end -->\n')
  assert results_tables.main([f'--page={page}']) == 2
  page.write_text('<!-- results-table: ppo_1m -->\n')
  assert results_tables.main([f'--page={page}']) == 2
  err = capsys.readouterr().err
  assert "unknown table 'nope'" in err and 'no <!-- end -->' in err


def test_the_readme_gives_the_main_commands_figure_from_its_json():
  with open(os.path.join(REPO_ROOT, 'README.md')) as f:
    readme = f.read()
  figure = results_tables.readme_ppo_mujoco()
  assert figure.startswith('IQM of the final return ')
  assert figure in readme, figure
  # And the figures beside it, from the async matrix of results.md's ppo_1m.
  with open(os.path.join(results_tables.RESULTS, 'ppo_1m_async.json')) as f:
    (cell,) = json.load(f)['cells']
  walls = [r['wall_time_seconds'] for r in cell['runs']]
  assert (f'1M steps in {results_tables.fmt(min(walls))}-'
          f'{results_tables.fmt(max(walls))} s on a 2-core VM, mean final '
          f'return {results_tables.fmt(cell["final_return_mean"])} over '
          f'{len(cell["runs"])} seeds') in readme


def test_the_iqms_written_by_hand_are_those_of_their_json():
  with open(results_tables.PAGE) as f:
    page = f.read()
  for matrix, task in results_tables.HAND_WRITTEN_IQMS:
    iqm = results_tables.hand_written_iqm(matrix, task)
    assert f'IQM {iqm} |' in page or f'| {iqm} |' in page, (matrix, task, iqm)
