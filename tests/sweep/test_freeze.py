"""A process tree frozen, moved to other cores and thawed (freeze.py): a
real parent with a child in a session of its own, as a launcher and its
nodes are, each counting into a file."""

import os
import subprocess
import sys
import time

import pytest

from acme_launch.sweep import freeze
from acme_launch.testing.launcher import wait_for

# Counts into argv[1] ten times a second, on two threads; with argv[2],
# first starts a copy of itself in a new session counting into that file.
COUNTER = r'''
import os, subprocess, sys, threading, time
if len(sys.argv) > 2:
  subprocess.Popen([sys.executable, __file__, sys.argv[2]],
                   start_new_session=True)
def count():
  n = 0
  while True:
    n += 1
    with open(sys.argv[1] + '.tmp', 'w') as f:
      f.write(str(n))
    os.replace(sys.argv[1] + '.tmp', sys.argv[1])
    time.sleep(0.1)
threading.Thread(target=count, daemon=True).start()
while True:
  time.sleep(1)
'''


def _count(path):
  try:
    with open(path) as f:
      return int(f.read() or 0)
  except FileNotFoundError:
    return 0


def _kill_tree(popen):
  for pid in freeze.tree(popen.pid):
    try:
      os.kill(pid, 9)
    except ProcessLookupError:
      pass
  popen.wait()


@pytest.fixture
def launcher(tmp_path):
  script = tmp_path / 'counter.py'
  script.write_text(COUNTER)
  parent, child = str(tmp_path / 'parent'), str(tmp_path / 'child')
  popen = subprocess.Popen([sys.executable, str(script), parent, child],
                           preexec_fn=lambda: os.sched_setaffinity(0, {0}))
  try:
    wait_for(lambda: _count(parent) > 2 and _count(child) > 2, 30,
             'both processes counting')
    yield popen, parent, child
  finally:
    _kill_tree(popen)


def test_the_whole_tree_stops_keeps_its_state_moves_and_goes_on(launcher):
  popen, parent, child = launcher
  pids = freeze.stop(popen.pid)
  assert pids[0] == popen.pid and len(pids) == 2, pids
  # Each process stopped (state T), every thread with it: nothing counts.
  for pid in pids:
    with open(f'/proc/{pid}/stat') as f:
      assert f.read().rsplit(')', 1)[1].split()[0] == 'T'
  counts = _count(parent), _count(child)
  time.sleep(1.0)
  assert (_count(parent), _count(child)) == counts
  if len(os.sched_getaffinity(0)) >= 2:
    other = sorted(os.sched_getaffinity(0) - {0})[0]
    freeze.move(pids, (0,), (other,))
    for pid in pids:
      for tid in os.listdir(f'/proc/{pid}/task'):
        assert os.sched_getaffinity(int(tid)) == {other}, (pid, tid)
  freeze.cont(pids)
  wait_for(lambda: _count(parent) > counts[0] + 2 and
           _count(child) > counts[1] + 2, 30, 'both counting again')
  assert popen.poll() is None


def test_a_tree_that_ended_is_stopped_and_thawed_without_error(launcher):
  popen, _, _ = launcher
  pids = freeze.tree(popen.pid)
  for pid in reversed(pids):
    os.kill(pid, 9)
  popen.wait()
  freeze.cont(freeze.stop(popen.pid))
  freeze.move(pids, (0,), (0,))


# Forks without pause: each child lives a moment, the parent reaps it.
FORKER = r'''
import os, time
while True:
  if os.fork() == 0:
    if os.fork() == 0:  # A grandchild too, forked as soon as its parent.
      time.sleep(0.2)
    time.sleep(0.2)
    os._exit(0)
  while True:
    try:
      if os.waitpid(-1, os.WNOHANG)[0] == 0:
        break
    except ChildProcessError:
      break
'''


def test_a_tree_that_forks_in_a_loop_is_stopped_whole(tmp_path):
  script = tmp_path / 'forker.py'
  script.write_text(FORKER)
  popen = subprocess.Popen([sys.executable, str(script)])
  try:
    wait_for(lambda: len(freeze.tree(popen.pid)) > 3, 30, 'children forked')
    for _ in range(30):
      pids = freeze.stop(popen.pid)
      # Every process under the launcher now, not only those it signalled,
      # is stopped: a child forked as the stop went out was found.
      running = [p for p in freeze.tree(popen.pid)
                 if freeze._state(p) not in ('T', 'Z', 'X', '')]
      assert not running, (running, pids)
      freeze.cont(pids)
      time.sleep(0.005)
  finally:
    _kill_tree(popen)


def test_a_move_between_uneven_slots_keeps_every_thread_in_its_new_slot():
  from acme_launch.sweep import slots
  cut = slots.make_slots(3, range(16), (), False)
  assert sorted(len(s.cores) for s in cut) == [5, 5, 6]
  for old in cut:
    for new in cut:
      # The whole old slot becomes the whole new one.
      assert freeze.moved(set(old.cores), old.cores, new.cores) == set(
          new.cores)
      for i, core in enumerate(old.cores):
        # A thread pinned to one core lands on one core of the new slot,
        # in the same place along it.
        to = freeze.moved({core}, old.cores, new.cores)
        assert len(to) == 1 and to <= set(new.cores), (old, new, core, to)
        assert to == {new.cores[i * len(new.cores) // len(old.cores)]}
  # A core outside the old slot stays.
  assert freeze.moved({99}, (0, 1), (2, 3)) == {99}


# A launcher that counts, and starts a node when RESTART appears (once): the
# node pins itself to the cores in argv[2], as a node does at its start
# (node/entry.py pin_cores: its planned cores), and counts.
RESTARTER = r'''
import os, subprocess, sys, time
restart, cores = sys.argv[1], sys.argv[2]
node = None
while True:
  if node is None and os.path.exists(restart):
    node = subprocess.Popen([sys.executable, '-c',
        'import os, time\nos.sched_setaffinity(0, {%s})\n'
        'open(%r, "w").close()\nwhile True: time.sleep(0.1)'
        % (cores, restart + '.pinned')], start_new_session=True)
  time.sleep(0.05)
'''


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                    reason='two slots need two cores')
def test_a_node_restarted_after_a_move_runs_on_the_new_slot(tmp_path):
  # A member running through, frozen on slot 0 and thawed on slot 1
  # (trials.MemberTrial); then one of its nodes restarts, pinning itself
  # to the cores its program planned, on slot 0, another member's now. At
  # its next report the member has every process of its program on slot 1.
  from acme_launch.sweep import slots
  from acme_launch.sweep import trials
  first, second = sorted(os.sched_getaffinity(0))[:2]
  slot0, slot1 = slots.Slot(0, (first,), ()), slots.Slot(1, (second,), ())
  script, restart = tmp_path / 'restarter.py', tmp_path / 'restart'
  script.write_text(RESTARTER)
  control = tmp_path / 'control'
  control.mkdir()
  context = trials.TrialContext(
      sweep_dir=str(tmp_path), control=str(control), cwd=str(tmp_path),
      env={}, slots=(slot0, slot1), argv={'m': ()}, report_seconds=0.2,
      interval_steps=1000, budget={'m': 4000}, through=True, freeze=True)
  member = object.__new__(trials.MemberTrial)  # Its steps, on this program.
  member._trial_info = None  # Tune's: its trial id is then 'default'.
  member.setup({'point': 'm', 'values': {}}, context)
  member._popen = subprocess.Popen(
      [sys.executable, str(script), str(restart), str(first)],
      preexec_fn=lambda: os.sched_setaffinity(0, {first}))
  member._slot = member._launch_slot = slot0
  member._log = open(tmp_path / 'm.log', 'a')
  try:
    member._frozen = freeze.stop(member._popen.pid)
    member._frozen_slot, member._slot = slot0, slot1
    member._thaw()
    restart.write_text('')
    wait_for(lambda: os.path.exists(f'{restart}.pinned'), 30,
             'the node restarted')
    member.step()  # Its next report.
    pids = freeze.tree(member._popen.pid)
    assert len(pids) == 2
    for pid in pids:
      for tid in os.listdir(f'/proc/{pid}/task'):
        assert os.sched_getaffinity(int(tid)) == {second}, (pid, tid)
  finally:
    member._log.close()
    _kill_tree(member._popen)
