"""MetricsFollower: complete new rows only, once each, across restarts."""

import csv
import os

from acme_launch.tracking import follower


def _write(path, text, mode='a'):
  with open(path, mode) as f:
    f.write(text)


def test_reads_complete_rows_once_with_node_prefix_and_steps(tmp_path):
  path = tmp_path / 'actor_0.csv'
  _write(path, 'actor_steps,episode_return,note,wall_time\n'
         '100,-3.5,"[1, 2]",1700000000.5\n200,', mode='w')
  reader = follower.MetricsFollower(str(tmp_path))

  rows = reader.new_rows()
  assert [(r.node, r.step, r.values, r.time) for r in rows] == [
      ('actor_0', 100, {'actor_steps': 100.0, 'episode_return': -3.5},
       1700000000.5)]
  assert reader.new_rows() == []        # The half-written row waits.

  _write(path, '-1.0,x,1700000001.0\n')
  rows = reader.new_rows()
  assert [(r.step, r.values['episode_return']) for r in rows] == [(200, -1.0)]
  assert reader.state() == {'actor_0.csv': {
      'offset': os.path.getsize(path), 'rows': 2}}


def test_rows_without_actor_steps_are_stepped_by_their_number(tmp_path):
  with open(tmp_path / 'learner_0.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['learner_steps', 'loss', 'wall_time'])
    writer.writerows([[1, 0.5, 1.0], [2, '', 2.0], [3, 0.25, 3.0]])
  rows = follower.MetricsFollower(str(tmp_path)).new_rows()
  assert [r.step for r in rows] == [1, 2, 3]
  assert rows[1].values == {'learner_steps': 2.0}  # Empty cells left out.


def test_a_new_follower_from_saved_state_reads_only_later_rows(tmp_path):
  path = tmp_path / 'evaluator_0.csv'
  _write(path, 'actor_steps,episode_return,wall_time\n1000,5.0,1.0\n', mode='w')
  first = follower.MetricsFollower(str(tmp_path))
  assert len(first.new_rows()) == 1
  _write(path, '2000,7.0,2.0\n')

  # The launcher restarted (--resume): header read again from the file.
  second = follower.MetricsFollower(str(tmp_path), first.state())
  rows = second.new_rows()
  assert [(r.step, r.values['episode_return']) for r in rows] == [(2000, 7.0)]
  assert second.state()['evaluator_0.csv']['rows'] == 2
