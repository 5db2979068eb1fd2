"""End-to-end: JAX's persistent compilation cache, shared by runs."""

import os
import time

from tests.conftest import (killed_on_exit, read_json, run_launcher,
                            start_launcher)


def _entries(cache: str) -> dict:
  """Entry -> modification time (JAX's cache touches an entry it reads)."""
  return {name: os.path.getmtime(os.path.join(cache, name))
          for name in os.listdir(cache) if not name.startswith(('.', '_'))}


def _reached_budget(workdir: str, run: str) -> None:
  summary = read_json(os.path.join(workdir, run, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached', summary
  assert summary['learner_steps'] > 0


def test_two_concurrent_runs_share_the_cache_and_a_third_reads_it(tmp_path):
  workdir, cache = str(tmp_path / 'runs'), str(tmp_path / 'cache')
  # A small budget: the functions compiled are the same at any budget.
  common = ('--config=smoke', f'--workdir={workdir}',
            f'--compilation_cache={cache}', '--config.max_actor_steps=1000')
  # Two runs of one config at once, on an empty cache: both compile the
  # same functions and write the same entries at about the same time.
  with killed_on_exit(start_launcher(*common, '--run_name=a')) as a, \
       killed_on_exit(start_launcher(*common, '--run_name=b')) as b:
    for launcher in (a, b):
      out, err = launcher.communicate(timeout=400)
      assert launcher.returncode == 0, out + err
      assert 'compilation cache' not in err  # No warning: the cache was used.
  for run in ('a', 'b'):
    _reached_budget(workdir, run)
    record = read_json(os.path.join(workdir, run, 'nodes', 'learner_0.json'))
    assert record['env']['ACME_LAUNCH_COMPILATION_CACHE'] == cache
  written = _entries(cache)
  assert len(written) > 5
  assert not [n for n in os.listdir(cache) if n.startswith('_temp')]

  # A later run reads every function it needs from the cache, unharmed.
  started = time.time()
  result = run_launcher(*common, '--run_name=c')
  assert result.returncode == 0, result.stdout + result.stderr
  _reached_budget(workdir, 'c')
  after = _entries(cache)
  read = [n for n, mtime in written.items() if after[n] >= started]
  assert len(read) > 5
  assert len(after) - len(written) <= 2, set(after) - set(written)


def test_an_unusable_default_cache_folder_is_one_warning_and_the_run_goes_on(
    workdir, tmp_path):
  # The default folder ($XDG_CACHE_HOME/acme-launch/jax) under a file: the
  # run goes on without the cache. A --compilation_cache the user names is
  # checked like a run directory instead: one line, exit 2 (below).
  not_a_folder = tmp_path / 'file'
  not_a_folder.write_text('')
  result = run_launcher('--config=smoke', f'--workdir={workdir}',
                        '--run_name=r', '--config.max_actor_steps=1000',
                        env={'XDG_CACHE_HOME': str(not_a_folder)})
  assert result.returncode == 0, result.stdout + result.stderr
  warnings = [line for line in result.stderr.splitlines()
              if 'compilation cache' in line]
  assert len(warnings) == 1, result.stderr
  assert warnings[0].startswith('acme-launch: warning: no compilation cache (')
  _reached_budget(workdir, 'r')
  record = read_json(os.path.join(workdir, 'r', 'nodes', 'learner_0.json'))
  assert 'ACME_LAUNCH_COMPILATION_CACHE' not in record['env']


def test_an_unusable_cache_folder_named_by_the_user_is_one_line_exit_2(
    workdir, tmp_path):
  not_a_folder = tmp_path / 'file'
  not_a_folder.write_text('')
  result = run_launcher('--config=smoke', f'--workdir={workdir}',
                        '--run_name=r', f'--compilation_cache={not_a_folder}/jax')
  assert result.returncode == 2, result.stdout + result.stderr
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert lines == [
      f'acme-launch: error: folder holding the compilation cache {not_a_folder} '
      'is not a directory'], result.stderr
  assert not os.path.exists(os.path.join(workdir, 'r'))