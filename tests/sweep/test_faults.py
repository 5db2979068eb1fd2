"""Where a fault can land in a population (population.py, trials.py), in
process: what a member reports and what its run directory holds after
the launcher stopped (Ctrl-C or kill -9) at each place, read back as a
--resume reads it. Tune's own part (who waits, who is compared, a resumed
population compared where it stopped) is in tests/sweep/test_population.py;
one population killed and resumed end to end is
tests/e2e/sweep/test_population.py.

    where the fault lands       through / frozen          taking turns
    after a boundary, before    the score at B again      it stops at B again
      its comparison            from the run's rows;      (segment_end), its
                                frozen: thawed for the    summary's score
                                stop, saved, ended
    an exploit staged, not      kept; applied at the      the same
      applied                   next start, which alone
                                says it copied
    during a copy (decided,     the comparison is made    the same
      or applied)               again / the apply ends
    a member failing past its   compared without it,      the same
      retries before a boundary failed; after --resume
                                it catches up
    a torn metrics row          skipped; the next whole   skipped; the score
                                evaluation                is its summary's
    a new start while the old   waits for it to let go    the same
      program still stops       of the run directory

A member running through, frozen at boundaries, is frozen as soon as its
evaluator scores it at the boundary, not at its next report.
"""

import os
import subprocess
import sys
import time

import pytest

from acme_launch import layout
from acme_launch.program import nodes
from acme_launch.run import rundir
from acme_launch.sweep import record as sweep_record
from acme_launch.sweep import slots
from acme_launch.sweep import trials
from acme_launch.testing import sweep_dirs
from acme_launch.testing.launcher import REPO_ROOT, wait_for


def _member(tmp_path, name='m', synced=0, argv=(), through=True):
  """A member running through, or taking turns (its trial's own steps, no
  program until one starts it, with `argv`), the population last compared
  at `synced`."""
  control = tmp_path / f'control-{name}'  # Its trial id is 'default'.
  control.mkdir(exist_ok=True)
  trials.write_synced(str(control), synced)
  context = trials.TrialContext(
      sweep_dir=str(tmp_path), control=str(control), cwd=str(tmp_path),
      env=dict(os.environ), slots=(slots.Slot(0, (0,), ()),),
      argv={name: tuple(argv)}, interval_steps=1000, budget={name: 4000},
      through=through)
  member = object.__new__(trials.MemberTrial)
  member._trial_info = None  # Tune's: its trial id is then 'default'.
  member.setup({'point': name, 'values': {'lr': 0.1}}, context)
  member._reported = synced  # As its (re)start sets it.
  return member


def _evaluations(run_dir, rows, torn_after=None):
  """The evaluator's rows as its node writes them; with `torn_after`,
  killed in the middle of the row after that many, then resumed."""
  os.makedirs(os.path.join(run_dir, 'metrics'), exist_ok=True)
  logger = nodes.MetricsLogger(run_dir, 'evaluator/0')
  for steps, value in rows[:torn_after]:
    logger.write({'actor_steps': steps, 'episode_return': value})
  logger.close()
  if torn_after is None:
    return
  path = layout.metrics_path(run_dir, 'evaluator/0')
  with open(path, 'a') as f:
    f.write(f'{rows[torn_after][0]},')  # Cut by the kill.
  resumed = nodes.MetricsLogger(run_dir, 'evaluator/0')
  for steps, value in rows[torn_after + 1:]:
    resumed.write({'actor_steps': steps, 'episode_return': value})
  resumed.close()


ROWS = [(900, 1.0), (1100, 2.0), (1900, 3.0), (2050, 5.0), (2300, 6.0)]


@pytest.mark.parametrize('synced, expected', [(1000, (2000, 5.0)),
                                              (2000, (2000, 5.0))])
def test_killed_after_a_boundary_a_member_running_through_scores_there_again(
    tmp_path, synced, expected):
  # It reached 2,000 (its first evaluation there: 5.0 at 2,050) and ran
  # on; the launcher stopped before (1,000 compared) or after (2,000) the
  # comparison there. Resumed, it reports the same score at the same
  # boundary: the next comparison's, or, compared, no new one.
  member = _member(tmp_path, synced=synced)
  _evaluations(str(tmp_path / 'm'), ROWS)
  result = member._boundary_result()
  assert (result['segment_steps'], result['segment_return']) == expected
  assert bool(result.get('boundary')) == (synced < 2000)


def test_a_row_torn_at_the_boundary_is_skipped_for_the_next_whole_one(
    tmp_path):
  # Killed while its evaluator wrote the evaluation at 2,050: the resumed
  # evaluator starts a new line; the member's score at 2,000 is its first
  # whole evaluation there (6.0 at 2,300), and nothing raises.
  member = _member(tmp_path, synced=1000)
  _evaluations(str(tmp_path / 'm'), ROWS, torn_after=3)
  result = member._boundary_result()
  assert (result['segment_steps'], result['segment_return']) == (2000, 6.0)
  assert trials.boundary_score(str(tmp_path / 'm'), 1000) == 2.0


def _learner(run_dir, text):
  path = os.path.join(trials.learner_checkpoints(run_dir), 'ckpt-1.index')
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(text)


def _learner_text(run_dir):
  path = os.path.join(trials.learner_checkpoints(run_dir), 'ckpt-1.index')
  with open(path) as f:
    return f.read()


@pytest.mark.parametrize('cut', ['own removed', 'copy moved in'])
def test_an_apply_cut_short_by_a_kill_is_finished_by_the_next_start(
    tmp_path, cut):
  # The member's start replaces its learner with the staged copy: killed
  # after its own was removed, or after the copy was moved in and before
  # the staged folder was: its next start ends the apply, the copy kept.
  run_dir, donor = str(tmp_path / 'm'), str(tmp_path / 'donor')
  _learner(run_dir, 'own')
  _learner(donor, 'donor')
  trials.stage_exploit(run_dir, os.path.join(donor, 'checkpoints'), 'donor',
                       2030, {'lr': 0.2}, {'lr': 0.1})
  own = trials.learner_checkpoints(run_dir)
  if cut == 'own removed':
    import shutil
    shutil.rmtree(own)
  else:
    os.replace(own, own + '.old')
    os.rename(os.path.join(trials.exploit_dir(run_dir), 'learner'), own)
  staged = trials.apply_staged_exploit(run_dir)
  assert staged['values'] == {'lr': 0.2} and staged['point'] == 'donor'
  assert _learner_text(run_dir) == 'donor'
  assert not os.path.exists(trials.exploit_dir(run_dir))


def test_an_exploit_staged_before_a_stop_is_the_members_next_values(tmp_path):
  # Decided and recorded at a comparison, staged, not applied when the
  # launcher stopped: Tune is given its values, and its next start
  # applies it (through, frozen or taking turns alike: MemberTrial's
  # start).
  run_dir, donor = str(tmp_path / 'm'), str(tmp_path / 'donor')
  _learner(run_dir, 'own')
  _learner(donor, 'donor')
  trials.stage_exploit(run_dir, os.path.join(donor, 'checkpoints'), 'donor',
                       2030, {'lr': 0.2}, {'lr': 0.1})
  record = {'points': [{'name': 'm'}, {'name': 'donor'}], 'population': {
      'compared': 2000, 'exploits': [{'actor_steps': 2000, 'member': 'm',
                                      'copied': 'donor',
                                      'copied_steps': 2030}]}}
  assert trials.undo_exploits(str(tmp_path), record) == []
  member = _member(tmp_path, synced=2000)
  assert member._values == {'lr': 0.2}
  assert trials.first_values(run_dir, {'lr': 0.1}) == {'lr': 0.2}
  trials.apply_staged_exploit(run_dir)
  assert _learner_text(run_dir) == 'donor'


@pytest.mark.parametrize('resumed', [False, True])
def test_a_member_left_out_after_failing_is_failed_in_the_summary(
    tmp_path, resumed):
  # A member that failed past its retries before the boundary at 500:
  # compared without it (population.left_out), it is failed, the others'
  # figures stand, and the sweep's exit code is 1 (runner.run: failed).
  # After a --resume that took it to its budget it is finished (exit 0),
  # and the comparison it missed stays recorded.
  sweep_dir = str(tmp_path / 'sweep')
  names = sweep_dirs.write_sweep(sweep_dir, {'0.001': [10.0, 20.0, 30.0]})
  record = sweep_record.read_record(sweep_dir)
  record['scheduler'] = {'name': 'pbt'}
  record['population'] = {'compared': 500, 'left_out': [
      {'actor_steps': 500, 'members': [names[2]]}]}
  if not resumed:
    path = layout.summary_path(os.path.join(sweep_dir, names[2]))
    layout.write_json_atomic(path, {
        **layout.read_json(path), 'exit_reason': 'node_failed',
        'actor_steps': 300, 'final_eval_return_mean': None,
        'last_eval_return': 30.0, 'last_eval_actor_steps': 300})
  for entry in record['points']:
    entry['values'] = {'ppo.learning_rate': 0.001}
  layout.write_json_atomic(sweep_record.record_path(sweep_dir), record)
  table = sweep_record.summarize(sweep_dir, record)
  assert table['failed'] == ([] if resumed else [names[2]])
  assert table['population']['left_out'] == [
      {'actor_steps': 500, 'members': [names[2]]}]
  assert table['settings'][0]['returns'] == (
      [10.0, 20.0, 30.0] if resumed else [10.0, 20.0])
  assert table['population']['best'] == names[2 if resumed else 1]


@pytest.mark.parametrize('summary_lost, torn', [(False, False),
                                               (True, False), (True, True)])
def test_killed_after_a_segment_a_member_taking_turns_scores_there_again(
    tmp_path, summary_lost, torn):
  # Its segment ended at 2,000 (its final evaluation 5.0) and the launcher
  # stopped before the comparison there; or its program was killed after
  # that evaluation, before its summary (and in the middle of an
  # evaluator's row). Resumed, it stops at 2,000 again
  # (population.segment_end) and its launch there has nothing to do: its
  # summary, the member's score, says 5.0 at 2,000 again.
  from acme_launch.run import summary as summary_lib
  from acme_launch.sweep import population
  run_dir = str(tmp_path / 'm')
  sweep_dirs.write_run(run_dir, 5.0, steps=2000)
  if summary_lost:
    os.remove(layout.summary_path(run_dir))
  if torn:
    with open(layout.metrics_path(run_dir, 'evaluator/0'), 'a') as f:
      f.write('204')  # Cut by the kill, in its first field.
  end = population.segment_end(2040, 1000, 4000, compared=1000)
  summary = summary_lib.at_budget(run_dir, end, {'actor_steps': 2040})
  assert end == 2000
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['final_eval_return_mean'] == 5.0
  assert summary['last_eval_return'] == (5.0 if summary_lost else 2.5)


@pytest.mark.parametrize('start, through', [
    ('applies the staged copy', True), ('applies the staged copy', False),
    ('dropped at its budget', True), ('retried after the copy', True),
    ('retried after the copy', False)])
def test_a_members_start_says_it_copied_only_what_it_applied(
    tmp_path, start, through):
  # Tune calls load_checkpoint with the donor's checkpoint when it decides
  # the exploit (and again when it starts a failed trial again: the
  # donor's is then its latest), then the member's next step starts it.
  # Applies: the copy staged at the comparison (before a stop, or not) is
  # applied by this start. Dropped: its program reached its budget before
  # it stopped to copy (on a Ray cluster members run through without
  # waiting): the staged copy is dropped. Retried: the copy was applied by
  # the start before the failure. Only the first copies: its launch's
  # `copied` (sweep.json, the replayed schedule) names the donor, the
  # others' none. Each goes on from its own actor steps. Its program is
  # refused at once (a flag it does not know): the start is under test.
  donor = _member(tmp_path, name='donor')
  sweep_dirs.write_run(str(tmp_path / 'donor'), 6.0, steps=2030)
  _learner(str(tmp_path / 'donor'), 'donor')
  checkpoint = str(tmp_path / 'tune_checkpoint')
  os.makedirs(checkpoint)
  donor.save_checkpoint(checkpoint)
  member = _member(tmp_path, synced=2000, argv=['--not_a_launcher_flag'],
                   through=through)
  (tmp_path / 'logs').mkdir()  # The sweep's, its launches' logs.
  run_dir = str(tmp_path / 'm')
  steps = 4000 if start == 'dropped at its budget' else 2000
  sweep_dirs.write_run(run_dir, 1.0, steps=steps)
  layout.write_json_atomic(layout.config_path(run_dir), {'config': {}})
  _learner(run_dir, 'donor' if start == 'retried after the copy' else 'own')
  if start != 'retried after the copy':
    trials.stage_exploit(run_dir, checkpoint, 'donor', 2030, {'lr': 0.2},
                         {'lr': 0.1})
    at = trials.staged_exploit(run_dir)['at']
  member.load_checkpoint(checkpoint)
  try:
    started = member.step()
    assert started['event'] == 'started'
    # It goes on from its own run directory, none of its steps lost.
    assert started['resumed'] and started['actor_steps'] == steps
    with open(tmp_path / 'logs' / 'm.log') as f:
      assert f'--resume={run_dir}' in f.read()
    if start == 'applies the staged copy':
      assert started['copied'] == {'point': 'donor', 'actor_steps': 2030,
                                   'at': at}
      assert started['values'] == {'lr': 0.2}
    else:
      assert started['copied'] is None, started['copied']
      assert started['values'] == {'lr': 0.1}
    assert started.get('exploit_dropped', False) == (
        start == 'dropped at its budget')
    assert started.get('segment_end') == (None if through else 3000)
    assert _learner_text(run_dir) == (
        'own' if start == 'dropped at its budget' else 'donor')
    assert trials.staged_exploit(run_dir) is None
    ended = member.step()
    while not ended.get('done'):
      ended = member.step()
    assert ended['exit_code'] == 2  # Its program ran, and was refused.
  finally:
    member.cleanup()


# A member's program as a stop sees it: on SIGINT or SIGTERM it saves (a
# file naming the signal) and exits 130.
PROGRAM = r'''
import signal, sys, time
def stop(signum, frame):
  with open(sys.argv[1], 'w') as f:
    f.write(str(signum))
  sys.exit(130)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + '.started', 'w').close()
while True:
  time.sleep(0.05)
'''


def _member_running_frozen(tmp_path, report_seconds):
  """A member running through, frozen at boundaries, the population
  compared at 1,000, its program PROGRAM (saving to the path returned)."""
  member = _member(tmp_path, synced=1000)
  context = member._context
  member._context = trials.TrialContext(**{
      **context.__dict__, 'freeze': True, 'report_seconds': report_seconds,
      'member_slots': {'m': 0}})
  script, saved = tmp_path / 'program.py', str(tmp_path / 'saved')
  script.write_text(PROGRAM)
  member._popen = subprocess.Popen([sys.executable, str(script), saved],
                                   start_new_session=True)
  # What its start sets (trials.MemberTrial._start_member), for this one.
  member._slot = member._launch_slot = context.slots[0]
  member._started, member._signals_passed = time.time(), 0
  member._log = open(tmp_path / 'm.log', 'a')
  return member, saved


@pytest.mark.parametrize('kill', [False, True])
def test_a_stop_while_frozen_before_the_comparison_reaches_the_program(
    tmp_path, kill):
  # Frozen at a boundary until the comparison there, when the launcher
  # gets Ctrl-C: the member's program is thawed, gets the signal once,
  # saves and ends (--resume goes on from what it saved; the boundary is
  # compared then), and its trial ends with it, none left stopped. After
  # the grace time (`kill`): killed, frozen or not.
  import signal
  from acme_launch.sweep import freeze
  member, saved = _member_running_frozen(tmp_path, report_seconds=0.2)
  context = member._context
  try:
    wait_for(lambda: os.path.exists(saved + '.started'), 30,
             'the program started')
    member._frozen = freeze.stop(member._popen.pid)
    member._frozen_slot = member._slot
    trials.write_stop(context.control, {'signal': int(signal.SIGINT),
                                        'count': 1, 'kill': kill})
    deadline = time.monotonic() + 30
    result = member.step()
    while not result.get('done'):
      assert time.monotonic() < deadline, 'its program never ended'
      result = member.step()
    assert result['event'] == 'ended'
    assert result['exit_code'] == (-signal.SIGKILL if kill else 130)
    assert os.path.exists(saved) != kill
    if not kill:
      with open(saved) as f:
        assert f.read() == str(int(signal.SIGINT))
    assert member._frozen is None
  finally:
    if member._popen.poll() is None:
      member._popen.kill()
    member._popen.wait()
    member._log.close()


# A launcher that has taken its run directory (run/rundir.py's lock) and
# ends after a while, as a member's program stopped to copy does once its
# checkpoints are saved.
HOLDER = r'''
import sys, time
from acme_launch.run import rundir
rundir.take(sys.argv[1])
open(sys.argv[1] + '.taken', 'w').close()
time.sleep(float(sys.argv[2]))
'''


def test_a_member_starts_again_once_its_last_program_let_go_of_its_run_dir(
    tmp_path):
  # Tune starts a member it paused to copy in a new worker while the old
  # worker's cleanup still stops its program: the new start waits for that
  # launcher to end (a second launcher on the run directory is refused).
  member = _member(tmp_path)
  run_dir = str(tmp_path / 'm')
  member._wait_for_last_program()  # Nothing there: no wait.
  holder = subprocess.Popen([sys.executable, '-c', HOLDER, run_dir, '3'],
                            cwd=REPO_ROOT)
  try:
    wait_for(lambda: os.path.exists(run_dir + '.taken'), 60,
             'the launcher to take the run directory')
    assert rundir.in_use(run_dir)
    started = time.monotonic()
    member._wait_for_last_program()
    waited = time.monotonic() - started
    assert holder.wait(5) == 0 and not rundir.in_use(run_dir)
    assert 1.0 < waited < 10, waited
  finally:
    holder.kill()
    holder.wait()
  # A stop of the sweep ends the wait.
  holder = subprocess.Popen([sys.executable, '-c', HOLDER, run_dir, '60'],
                            cwd=REPO_ROOT)
  try:
    os.unlink(run_dir + '.taken')
    wait_for(lambda: os.path.exists(run_dir + '.taken'), 60,
             'the launcher to take the run directory')
    trials.write_stop(member._context.control, {'signal': 2, 'count': 1})
    started = time.monotonic()
    member._wait_for_last_program()
    assert time.monotonic() - started < 1 and rundir.in_use(run_dir)
  finally:
    holder.kill()
    holder.wait()


def test_a_member_is_frozen_as_soon_as_it_has_its_score_at_the_boundary(
    tmp_path):
  # Its report's period is long (30 s here): the evaluation that scores it
  # at the next boundary (2,000, the population compared at 1,000) freezes
  # its program at once, not at the end of the period; a fast task would
  # run on thousands of actor steps.
  run_dir = str(tmp_path / 'm')
  _evaluations(run_dir, ROWS[:3])  # Up to 1,900: none at 2,000 yet.
  member, saved = _member_running_frozen(tmp_path, report_seconds=30.0)
  try:
    wait_for(lambda: os.path.exists(saved + '.started'), 30,
             'the program started')
    # The counter's progress file (written every second) not yet past the
    # boundary: its evaluation's count is the later one.
    layout.write_json_atomic(layout.progress_path(run_dir), {
        'counts': {'actor_steps': 1990}, 'time': time.time()})
    logger = nodes.MetricsLogger(run_dir, 'evaluator/0')
    logger.write({'actor_steps': 2050, 'episode_return': 5.0})
    logger.close()
    started = time.monotonic()
    result = member.step()
    assert time.monotonic() - started < 5
    assert result['boundary'] and result['frozen']
    assert (result['segment_steps'], result['segment_return']) == (2000, 5.0)
    assert result['frozen_steps'] == 2050
    assert member._frozen
  finally:
    member.cleanup()
    member._popen.wait()
