"""The tables of docs/results.md, generated from the matrices in docs/results/.

    .venv/bin/python scripts/results_tables.py           # rewrite the tables
    .venv/bin/python scripts/results_tables.py --check   # exit 1 if the page differs

`bench/learning.py` writes each matrix as NAME.json (its runs' final
evaluations, speeds and evaluation curves; `--merge` pools seeds run apart).
A table on the page sits between `<!-- results-table: TABLE -->` and
`<!-- end -->`, TABLE one of `TABLES` below; this script writes what is
between the two markers from the JSON files that TABLE names, and nothing
else on the page. So a figure in those tables cannot differ from its data:
a new or merged matrix is copied into docs/results/ and this script run,
and the test suite runs `--check`. Text outside the markers (the command,
the measured-on line, the discussion) is written by hand.

Where a table gives an IQM, median or mean "[low, high]", the interval is
the 95% stratified bootstrap interval over the runs behind it
(acme_launch/stats: 2,000 resamples, seed 0, so the page repeats).

Rounding is half up on the decimal figure (51.05 s is 51.1), as a reader
rounds. A marker naming no table here, or one left open, is one line and
exit 2.
"""

import argparse
import decimal
import difflib
import importlib.util
import json
import os
import re
import statistics
import sys
from typing import Callable, Dict, List, Optional, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # This checkout's acme_launch, for its stats.
from acme_launch.stats import library as stats  # noqa: E402
from acme_launch.stats import spread  # noqa: E402
PAGE = os.path.join(REPO_ROOT, 'docs', 'results.md')
RESULTS = os.path.join(REPO_ROOT, 'docs', 'results')
EXIT_DIFFERS, EXIT_BAD_INPUT = 1, 2

_BEGIN = re.compile(r'^<!-- results-table: (?P<name>[\w-]+) -->$')
_END = '<!-- end -->'


def _learning():
  """bench/learning.py, whose "evaluations from half the budget on" the
  tables show, so that they read as the bench printed them."""
  path = os.path.join(REPO_ROOT, 'bench', 'learning.py')
  spec = importlib.util.spec_from_file_location('bench_learning', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


late_evaluations = _learning().late_evaluations


def fmt(value: Optional[float], decimals: int = 0) -> str:
  """`value` rounded half up, thousands separated: 4,806; 51.1."""
  if value is None:
    return '-'
  quantum = decimal.Decimal(1).scaleb(-decimals)
  rounded = decimal.Decimal(repr(float(value))).quantize(
      quantum, rounding=decimal.ROUND_HALF_UP)
  return f'{rounded:,}'


def steps_k(steps: float, grid: int) -> str:
  """Actor steps on the evaluation grid, as 350k or 1.5M."""
  at = round(steps / grid) * grid
  return f'{fmt(at / 1e6, 2).rstrip("0").rstrip(".")}M' if at >= 1e6 else (
      f'{at // 1000}k')


def _row(cells: Sequence[str]) -> str:
  return '|' + '|'.join(f' {c} ' if c else ' ' for c in cells) + '|'


def _table(header: Sequence[str], rows: List[Sequence[str]]) -> List[str]:
  return [_row(header), _row(['---'] * len(header)), *map(_row, rows)]


def _runs(cell: dict) -> List[dict]:
  return sorted(cell['runs'], key=lambda r: r['seed'])


def _sgd_per_second(run: dict) -> float:
  return run['learner_steps'] / run['wall_time_seconds']


def _final(run: dict, decimals: int = 1) -> str:
  return (f'{fmt(run["final_eval_return_mean"], decimals)} +- '
          f'{fmt(run["final_eval_return_std"], decimals)}')


def _mean_std(cell: dict, decimals: int) -> str:
  return (f'{fmt(cell["final_return_mean"], decimals)} +- '
          f'{fmt(cell["final_return_std"], decimals)}')


def _estimate(estimate: dict, decimals: int) -> str:
  """'5,052 [4,861, 5,234]', or the value alone where one run gives none."""
  if estimate['low'] is None:
    return fmt(estimate['value'], decimals)
  return (f'{fmt(estimate["value"], decimals)} [{fmt(estimate["low"], decimals)}'
          f', {fmt(estimate["high"], decimals)}]')


def _iqm(finals: Sequence[float], decimals: int) -> str:
  """IQM [95% interval] over the final returns, and how many runs."""
  return (f'{_estimate(stats.interval_estimates(finals)["iqm"], decimals)} '
          f'({len(finals)} runs)')


def _per_seed(cell: dict, decimals: int) -> str:
  return ' / '.join(fmt(r['final_eval_return_mean'], decimals)
                    for r in _runs(cell))


def _seed_range(seeds: Sequence[int]) -> str:
  seeds = sorted(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f'{seeds[0]}-{seeds[-1]}'
  return ', '.join(map(str, seeds))


def _flags(matrix: dict) -> str:
  return ' '.join(f'`{f}`' for f in matrix['launch_flags']) or 'none'


# ---- the tables ----

def ppo_1m(matrices: Dict[str, dict]) -> List[str]:
  """`ppo_mujoco` on HalfCheetah-v4, async (shipped) against sync mode."""
  rows = []
  for name, mode in (('ppo_1m_async', 'async (shipped)'),
                     ('ppo_1m_sync', 'sync')):
    (cell,) = matrices[name]['cells']
    walls = [r['wall_time_seconds'] for r in _runs(cell)]
    rows.append([
        mode, _per_seed(cell, 0), _mean_std(cell, 0),
        _iqm(cell['final_returns'], 0),
        f'{" / ".join(fmt(w, 1) for w in walls)} s '
        f'(mean {fmt(statistics.fmean(walls), 1)})',
        fmt(cell['env_steps_per_second'])])
  seeds = _seed_range(matrices['ppo_1m_async']['cells'][0]['seeds'])
  return _table(['mode', f'final return per seed ({seeds})', 'mean +- std',
                 'IQM [95% interval]',
                 'wall time from launch to summary, per seed',
                 'env steps/s over the run'], rows)


def ppo_hopper_variants(matrices: Dict[str, dict]) -> List[str]:
  """`ppo_mujoco` on Hopper-v4 with one setting changed."""
  rows = []
  for name in ('ppo_rewnorm', 'ppo_nofinalrows'):
    (cell,) = matrices[name]['cells']
    rows.append([_flags(matrices[name]), _per_seed(cell, 0),
                 _mean_std(cell, 0), _iqm(cell['final_returns'], 0)])
  return _table(['launch flags', 'final return per seed (0, 1, 2)',
                 'mean +- std', 'IQM [95% interval]'], rows)


def _per_seed_rows(matrix: dict, sgd_decimals: int,
                   speed_seeds: Optional[Sequence[int]] = None) -> List[str]:
  """A row per (game, seed): final evaluation, the evaluations from half
  the budget on, wall time and rates (of `speed_seeds` only, if given)."""
  cells = matrix['cells']
  half = steps_k(cells[0]['steps'] / 2, 50_000)
  rows = []
  for cell in cells:
    for run in _runs(cell):
      late = late_evaluations(run, cell['steps'])
      speed = '-'
      if speed_seeds is None or run['seed'] in speed_seeds:
        speed = (f'{fmt(run["wall_time_seconds"] / 60, 1)} min, '
                 f'{fmt(run["env_steps_per_second"])}, '
                 f'{fmt(_sgd_per_second(run), sgd_decimals)}')
      rows.append([
          f'`{cell["env"]}`, seed {run["seed"]}', _final(run),
          f'{fmt(late[0], 1)} to {fmt(late[1], 1)}, mean {fmt(late[2], 1)}',
          speed])
  return _table(['game, seed', 'final return (10 games)',
                 f'evaluations from {half} steps on',
                 'wall time, env steps/s, SGD steps/s'], rows)


def minatar_dqn(matrices: Dict[str, dict]) -> List[str]:
  return _per_seed_rows(matrices['minatar_dqn'], sgd_decimals=0)


def minatar_r2d2(matrices: Dict[str, dict]) -> List[str]:
  # Seeds 1 and 2 ran one at a time with the learner's LSTM loop; seed 0's
  # speeds are of an earlier learner and two runs at once.
  return _per_seed_rows(matrices['minatar_r2d2'], sgd_decimals=1,
                        speed_seeds=(1, 2))


def minatar_impala(matrices: Dict[str, dict]) -> List[str]:
  """Final returns per seed, and the evaluations' mean over seeds by band."""
  # Seed 0's speeds are of an earlier learner, beside other runs.
  speed_seeds = (1, 2)
  bands = [(50_000, 450_000), (500_000, 950_000), (1_000_000, 1_450_000),
           (1_500_000, 1_950_000)]
  rows = []
  for cell in matrices['minatar_impala']['cells']:
    band_means = []
    for low, high in bands:
      per_seed = []
      for run in _runs(cell):
        curve = run['curve'][:-1]  # The final evaluation, at the budget.
        values = [value for at, value in curve
                  if low <= round(at / 50_000) * 50_000 <= high]
        per_seed.append(statistics.fmean(values))
      band_means.append(fmt(statistics.fmean(per_seed), 1))
    fast = [r for r in _runs(cell) if r['seed'] in speed_seeds]
    join = lambda xs: ' and '.join(xs)
    rows.append([
        f'`{cell["env"]}`', ', '.join(band_means), _per_seed(cell, 1),
        _mean_std(cell, 1),
        f'{join(fmt(r["wall_time_seconds"] / 60, 1) for r in fast)} min, '
        f'{join(fmt(r["env_steps_per_second"]) for r in fast)}, '
        f'{join(fmt(_sgd_per_second(r), 1) for r in fast)}'])
  band_names = ', '.join(f'{steps_k(a, 50_000)}-{steps_k(b, 50_000)}'
                         for a, b in bands)
  return _table([
      'game', f'evaluations, mean of the seeds by band: {band_names}',
      'final return at 2M (10 games), seeds 0 / 1 / 2', 'mean +- std',
      'wall time, env steps/s, SGD steps/s (seeds '
      f'{" and ".join(map(str, speed_seeds))})'], rows)


def minatar_summary(matrices: Dict[str, dict]) -> List[str]:
  """Mean +- std over seeds of the final returns, per agent and game."""
  names = ('minatar_dqn', 'minatar_r2d2', 'minatar_impala')
  columns = []
  for name in names:
    cells = matrices[name]['cells']
    columns.append({c['env']: c for c in cells})
  games = list(columns[0])
  header = ['game'] + [
      f'`{cells[games[0]]["config"]}`, '
      f'{steps_k(cells[games[0]]["steps"], 50_000)} steps, '
      f'{len(cells[games[0]]["seeds"])} seeds' for cells in columns]
  rows = [[f'`{game}`'] + [f'{_mean_std(cells[game], 1)}; IQM '
                           f'{_iqm(cells[game]["final_returns"], 1)}'
                           for cells in columns]
          for game in games]
  return _table(header, rows)


def atari_pong_dqn_cpu(matrices: Dict[str, dict]) -> List[str]:
  (cell,) = matrices['atari_pong_dqn_cpu']['cells']
  (run,) = cell['runs']
  curve = run['curve'][:-1]
  late = late_evaluations(run, cell['steps'])
  above_0 = next((at, v) for at, v in curve if v > 0)
  at_20 = next((at, v) for at, v in curve if v >= 20)
  return _table(['', ''], [
      [f'final return (10 whole games at {steps_k(cell["steps"], 50_000)} '
       'steps)', _final(run)],
      [f'evaluations (3 games every 25k steps) from '
       f'{steps_k(cell["steps"] / 2, 25_000)} steps on',
       f'{fmt(late[0], 1)} to {fmt(late[1], 1)}, mean {fmt(late[2], 1)}'],
      ['first evaluation above 0; at 20 or more',
       f'{steps_k(above_0[0], 25_000)} steps ({fmt(above_0[1], 1)}); '
       f'{steps_k(at_20[0], 25_000)} ({fmt(at_20[1], 1)})'],
      ['wall time, env steps/s, SGD steps/s',
       f'{fmt(run["wall_time_seconds"] / 60)} min, '
       f'{fmt(run["env_steps_per_second"])}, '
       f'{fmt(_sgd_per_second(run), 1)}'],
  ])


def _halfcheetah_runs(matrices: Dict[str, dict], names: Sequence[str]):
  """Every run of `ppo_mujoco` on HalfCheetah-v4 in the matrices named."""
  return [run for name in names for cell in matrices[name]['cells']
          if cell['config'] == 'ppo_mujoco' and cell['env'] == 'HalfCheetah-v4'
          for run in _runs(cell)]


# The main command's run groups: (label, matrices).
PPO_HALFCHEETAH_GROUPS = (
    ('seeds 0-11, 2026-11-28 (`ppo_halfcheetah_12.json`)',
     ('ppo_halfcheetah_12',)),
    ('seeds 0-19: the twelve above and seeds 12-19, run after them '
     '(`ppo_halfcheetah_20.json`)', ('ppo_halfcheetah_20',)),
    ('seeds 0-5 twice, under heavy load (`ppo_stagger_after.json`, '
     '`ppo_stagger_after2.json`: the "after" columns of [episodes that stand '
     'still](#ppo-final-evaluations-episodes-that-stand-still))',
     ('ppo_stagger_after', 'ppo_stagger_after2')),
    ('seeds 0-19 and the twelve "after" runs together',
     ('ppo_halfcheetah_20', 'ppo_stagger_after', 'ppo_stagger_after2')),
)


# IQMs in tables written by hand (their other cells are not in the JSON):
# (matrix, task), each checked on the page by the test suite.
HAND_WRITTEN_IQMS = (
    ('ppo_stagger_before', 'HalfCheetah-v4'),
    ('ppo_stagger_after', 'HalfCheetah-v4'),
    ('ppo_stagger_after2', 'HalfCheetah-v4'),
    ('ppo_stagger_before', 'Hopper-v4'), ('ppo_stagger_after', 'Hopper-v4'),
    ('ppo_stagger_before', 'Walker2d-v4'), ('ppo_stagger_after', 'Walker2d-v4'),
)


def hand_written_iqm(matrix: str, task: str, results: str = RESULTS) -> str:
  """'IQM [low, high]' of a matrix's cell, as the page writes it."""
  with open(os.path.join(results, f'{matrix}.json')) as f:
    (cell,) = [c for c in json.load(f)['cells'] if c['env'] == task]
  iqm = stats.interval_estimates(cell['final_returns'])['iqm']
  return _estimate(iqm, 0)


def readme_ppo_mujoco(results: str = RESULTS) -> str:
  """The README's `ppo_mujoco` figure, from the first group's matrix: the
  test suite checks that the README holds it."""
  label, names = PPO_HALFCHEETAH_GROUPS[1]  # Seeds 0-19.
  matrices = {}
  for name in names:
    with open(os.path.join(results, f'{name}.json')) as f:
      matrices[name] = json.load(f)
  finals = [r['final_eval_return_mean']
            for r in _halfcheetah_runs(matrices, names)]
  return (f'IQM of the final return '
          f'{_estimate(stats.interval_estimates(finals)["iqm"], 0)} over '
          f'{len(finals)} runs')


def ppo_halfcheetah(matrices: Dict[str, dict]) -> List[str]:
  """The main command's final returns over its runs: IQM, median, mean with
  intervals; the final evaluations' low episodes and splits."""
  rows = []
  for label, names in PPO_HALFCHEETAH_GROUPS:
    runs = _halfcheetah_runs(matrices, names)
    finals = [r['final_eval_return_mean'] for r in runs]
    e = stats.interval_estimates(finals)
    episodes = [x for r in runs for x in r['final_eval_returns']]
    low = sum(x < 1000 for x in episodes)
    split = sum(spread.split(r['final_eval_returns']) is not None
                for r in runs)
    rows.append([label, str(len(runs)), _estimate(e['iqm'], 0),
                 _estimate(e['median'], 0), _estimate(e['mean'], 0),
                 f'{fmt(statistics.fmean(finals))} +- '
                 f'{fmt(statistics.pstdev(finals))}',
                 f'{low} / {len(episodes)} ({fmt(100 * low / len(episodes), 1)}%)',
                 f'{split} / {len(runs)}'])
  return _table(['runs', 'n', 'IQM [95% interval]', 'median [95% interval]',
                 'mean [95% interval]', 'mean +- std',
                 'final-evaluation episodes under 1,000',
                 'runs whose episodes split'], rows)


def _best_setting(row: dict) -> str:
  """'lr 0.0007163, clip 0.1752' from a sweep point's name."""
  fields = dict(part.split('=', 1) for part in row['best_point'].split(','))
  return ', '.join(f'{field.rsplit(".", 1)[-1]} {value}'
                   for field, value in fields.items())


def population_pbt(matrices: Dict[str, dict]) -> List[str]:
  """bench/population.py: per repetition, random search against the
  population of the same draws."""
  study = matrices['population_1m']
  rows = []
  for i, (random, pbt) in enumerate(study['repetitions']):
    rows.append([
        str(i), f'{fmt(random["best_return"])} ({_best_setting(random)})',
        f'{fmt(pbt["best_return"])} ({_best_setting(pbt)})',
        f'{fmt(100 * pbt["best_return"] / random["best_return"], 1)}%',
        _estimate(stats.interval_estimates(random['finals'])['iqm'], 0),
        _estimate(stats.interval_estimates(pbt['finals'])['iqm'], 0),
        f'{fmt(min(random["finals"]))} / {fmt(min(pbt["finals"]))}',
        str(pbt['exploits']),
        f'{fmt(random["wall_seconds"])} / {fmt(pbt["wall_seconds"])} s '
        f'({fmt(100 * pbt["wall_seconds"] / random["wall_seconds"])}%)'])
  return _table(['sweep seed', 'random search: best final return (its '
                 'setting)', 'population: best final return (the member, '
                 'by the point it started from)',
                 'population best / random best',
                 'random search: IQM of the 8 [95% interval]',
                 'population: IQM of the 8 [95% interval]',
                 'lowest final return: random / population', 'exploits',
                 'wall time: random / population'], rows)


# How a population's members waited at a boundary: (matrix, label); each
# matrix's first repetition (sweep seed 0).
POPULATION_WAITS = (
    ('population_frozen', 'frozen between turns on 2 slots (default)'),
    ('population_sharing', 'all at once, sharing 2 cores, not frozen'),
    ('population_study', 'stopped and started at each boundary, a segment '
     'a turn (`--nopbt_freeze`)'),
)


def population_waits(matrices: Dict[str, dict]) -> List[str]:
  """Random search of 8 against a population of the same 8 draws, one
  repetition for each way its members waited, each pair run together."""
  rows = []
  for name, label in POPULATION_WAITS:
    random, pbt = matrices[name]['repetitions'][0]
    rows.append([
        label, f'{fmt(random["wall_seconds"])} s',
        f'{fmt(pbt["wall_seconds"])} s',
        f'{fmt(100 * pbt["wall_seconds"] / random["wall_seconds"])}%',
        f'{fmt(random["best_return"])} / {fmt(pbt["best_return"])}',
        f'{_estimate(stats.interval_estimates(random["finals"])["iqm"], 0)}'
        f' / {_estimate(stats.interval_estimates(pbt["finals"])["iqm"], 0)}',
        f'{fmt(min(random["finals"]))} / {fmt(min(pbt["finals"]))}',
        f'{pbt.get("exploits", 0)} ({pbt["launches"]} launches)'])
  return _table(['300k steps a program, sweep seed 0: how the members '
                 'waited',
                 'random search of 8, two at a time: wall time',
                 'population of 8: wall time', 'population / random',
                 'best final return: random / population',
                 'IQM of the 8 [95% interval]: random / population',
                 'lowest final return: random / population',
                 'exploits (program launches)'], rows)


# ASHA's settings measured, each against the full search run beside it:
# (matrix, label).
ASHA_STUDIES = (
    ('asha_study', '300k steps a program, reduction 3: rungs at 33,333 and '
     '99,999'),
    ('asha_study_r2', '300k steps a program, reduction 2: rungs at 33,333, '
     '66,666 and 133,332'),
    ('population_1m', '1M steps a program, reduction 2: rungs at 111,111, '
     '222,222 and 444,444'),
)


def population_asha(matrices: Dict[str, dict]) -> List[str]:
  """bench/population.py: random search of 16 in full and under ASHA, for
  each setting measured."""
  rows = []
  for name, label in ASHA_STUDIES:
    full, early = matrices[name]['asha']
    rows.append([
        label, f'{fmt(full["best_return"])} / {fmt(early["best_return"])}',
        f'{fmt(100 * early["best_return"] / full["best_return"])}%',
        f'{_estimate(stats.interval_estimates(full["finals"])["iqm"], 0)} / '
        f'{_estimate(stats.interval_estimates(early["finals"])["iqm"], 0)}',
        str(early['stopped_early']),
        f'{fmt(early["actor_steps"])} of {fmt(full["actor_steps"])} '
        f'({fmt(100 * early["actor_steps"] / full["actor_steps"])}%)',
        f'{fmt(full["wall_seconds"])} / {fmt(early["wall_seconds"])} s'])
  return _table(['ASHA on random search of 16 (sweep seed 3)',
                 'best final return: in full / ASHA', 'ASHA best / full best',
                 'IQM of final returns [95% interval]: in full / ASHA',
                 'stopped early', 'actor steps, all programs: ASHA of full',
                 'wall time: in full / ASHA'], rows)


# TABLE: (the matrices it reads, by file name without .json; the writer).
TABLES: Dict[str, tuple] = {
    'ppo_1m': (('ppo_1m_async', 'ppo_1m_sync'), ppo_1m),
    'ppo_halfcheetah': (('ppo_halfcheetah_12', 'ppo_halfcheetah_20',
                         'ppo_stagger_after', 'ppo_stagger_after2'),
                        ppo_halfcheetah),
    'ppo_hopper_variants': (('ppo_rewnorm', 'ppo_nofinalrows'),
                            ppo_hopper_variants),
    'minatar_summary': (('minatar_dqn', 'minatar_r2d2', 'minatar_impala'),
                        minatar_summary),
    'minatar_impala': (('minatar_impala',), minatar_impala),
    'minatar_dqn': (('minatar_dqn',), minatar_dqn),
    'minatar_r2d2': (('minatar_r2d2',), minatar_r2d2),
    'atari_pong_dqn_cpu': (('atari_pong_dqn_cpu',), atari_pong_dqn_cpu),
    'population_pbt': (('population_1m',), population_pbt),
    'population_waits': (tuple(n for n, _ in POPULATION_WAITS),
                         population_waits),
    'population_asha': (tuple(n for n, _ in ASHA_STUDIES), population_asha),
}


class BadInput(Exception):
  pass


def render_table(name: str, results: str) -> List[str]:
  if name not in TABLES:
    raise BadInput(f'unknown table {name!r}; tables: {", ".join(TABLES)}')
  files, write = TABLES[name]
  matrices = {}
  for file in files:
    path = os.path.join(results, f'{file}.json')
    try:
      with open(path) as f:
        matrices[file] = json.load(f)
    except (OSError, ValueError) as e:
      raise BadInput(f'table {name}: cannot read {path}: {e}') from e
  return write(matrices)


def render(page: str, results: str) -> str:
  """`page` with every marked table rewritten from `results`."""
  out: List[str] = []
  lines = page.split('\n')
  i = 0
  while i < len(lines):
    out.append(lines[i])
    begin = _BEGIN.match(lines[i])
    i += 1
    if not begin:
      continue
    end = next((j for j in range(i, len(lines)) if lines[j] == _END), None)
    if end is None:
      raise BadInput(f'table {begin["name"]}: no {_END} after its marker '
                     f'(line {i})')
    # Blank lines around the table: Markdown renderers that read blocks
    # (mkdocs' Python-Markdown) take a table only as a block of its own.
    out.extend(['', *render_table(begin['name'], results), '', _END])
    i = end + 1
  return '\n'.join(out)


def main(argv: List[str], write: Callable[[str], None] = print) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--check', action='store_true',
                      help='change nothing; exit 1 if the page differs from '
                      'what the JSON gives')
  parser.add_argument('--page', default=PAGE)
  parser.add_argument('--results', default=RESULTS,
                      help='the folder of the JSON matrices')
  args = parser.parse_args(argv)
  with open(args.page) as f:
    page = f.read()
  try:
    generated = render(page, args.results)
  except BadInput as e:
    print(f'results_tables.py: error: {e}', file=sys.stderr)
    return EXIT_BAD_INPUT
  if generated == page:
    return 0
  if args.check:
    write(''.join(difflib.unified_diff(
        page.splitlines(True), generated.splitlines(True),
        args.page, 'from the JSON')))
    write(f'{args.page} differs from its JSON: run '
          '.venv/bin/python scripts/results_tables.py')
    return EXIT_DIFFERS
  with open(args.page, 'w') as f:
    f.write(generated)
  write(f'rewrote the tables of {args.page}')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
