"""Debugging a real program: a node in the foreground, post-mortem debuggers.

The debugger sessions are scripted through the launcher's stdin, as a user
would type them; each test asserts on what the debugger printed (the frame's
own variables) and on the run directory's summary.
"""

import os

import pytest

from tests.conftest import read_json, run_launcher, user_env


TASK = '--config.env_name=tests.faulty_env:RaisingHalfCheetah-v4'


def _run_with_stdin(stdin, *args, env=None):
  import subprocess
  import sys
  from tests.conftest import REPO_ROOT
  return subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), *args],
      cwd=REPO_ROOT, input=stdin, capture_output=True, text=True, timeout=300,
      env=user_env(env), check=False)


def test_debug_node_stops_at_a_breakpoint_in_this_terminal_and_the_run_goes_on(workdir):
  result = _run_with_stdin(
      "p ('STEPS', self._steps)\nc\n",
      '--config=smoke', '--config.max_actor_steps=3000', TASK,
      '--config.resources.node_overrides='
      'actor/0:extra_env=ACME_TEST_BREAKPOINT_AT_STEP=150',
      '--debug_node=actor/0', f'--workdir={workdir}', '--run_name=bp')
  assert result.returncode == 0, result.stderr[-3000:]
  assert '(Pdb)' in result.stdout
  assert "('STEPS', 150)" in result.stdout  # The actor's own frame, paused.
  summary = read_json(os.path.join(workdir, 'bp', 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= 3000


def test_pdb_opens_a_post_mortem_in_the_debugged_node_where_it_raised(workdir):
  # The default restarts (3) apply to the other actors, not to this one:
  # "q ends it, and with it the run", not a new actor raising again.
  result = _run_with_stdin(
      "p ('STEPS', self._steps)\nq\n",
      '--config=smoke', '--config.max_actor_steps=1000000', TASK,
      '--config.resources.node_overrides='
      'actor/0:extra_env=ACME_TEST_RAISE_AFTER_STEPS=200',
      '--debug_node=actor/0', '--pdb', f'--workdir={workdir}', '--run_name=pm')
  assert 'post-mortem debugger in actor/0' in result.stdout
  assert "('STEPS', 201)" in result.stdout  # The frame that raised.
  assert result.stdout.count('post-mortem debugger in actor/0') == 1
  assert 'restarting' not in result.stdout
  assert result.returncode == 1
  assert 'its post-mortem debugger (--pdb) has ended' in result.stderr
  summary = read_json(os.path.join(workdir, 'pm', 'summary.json'))
  assert summary['failed_node'] == 'actor/0'
  assert summary['node_restarts'] == {}, summary


def test_local_mt_pdb_opens_a_post_mortem_in_the_node_thread(workdir):
  result = _run_with_stdin(
      "p ('STEPS', self._steps)\nq\n",
      '--config=smoke', '--config.max_actor_steps=1000000', TASK,
      '--launch_type=local_mt', '--pdb', f'--workdir={workdir}',
      '--run_name=mt', env={'ACME_TEST_RAISE_AFTER_STEPS': '200'})
  assert 'post-mortem debugger' in result.stdout
  assert "('STEPS', 201)" in result.stdout
  assert result.returncode == 1
  # Node threads' own output went to the run's log, not this terminal.
  assert 'Reverb' not in result.stdout + result.stderr
  assert os.path.getsize(os.path.join(workdir, 'mt', 'logs', 'threads.log')) > 0


@pytest.mark.parametrize('args,words', [
    (['--debug_node=actor/7'], ['names no node', 'learner/0', 'actor/0']),
    (['--debug_node=actor/0', '--launch_type=local_mt'], ['--debug_node needs']),
    (['--pdb'], ['--pdb under local_mp needs --debug_node', 'evaluator/0']),
])
def test_bad_debugging_flags_are_one_line_and_exit_2(workdir, args, words):
  result = run_launcher('--config=smoke', f'--workdir={workdir}', *args)
  assert result.returncode == 2
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and lines[0].startswith('acme-launch: error:'), lines
  for word in words:
    assert word in lines[0]
  assert os.listdir(workdir) == []
