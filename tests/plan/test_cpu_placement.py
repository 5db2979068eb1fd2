"""CPU placement: core plans for made-up hosts (16 and 64 cores), and bad
input (what pinned nodes get in real launches: tests/e2e/plan/)."""

import pytest

from acme_launch import errors
from acme_launch.plan import node_env
from tests.plan.test_resources import plan as resource_plan


def nodes(actors, evaluators=1):
  return ([('replay', 0), ('counter', 0), ('learner', 0)] +
          [('actor', i) for i in range(actors)] +
          [('evaluator', i) for i in range(evaluators)])


def plan(host_cores, actors=2, evaluators=1, **settings):
  """A plan for `host_cores` with `group__field=value` settings."""
  return resource_plan(nodes=nodes(actors, evaluators), host_cores=host_cores,
                       **settings)


def cores(p):
  return {placement.node: placement.cores for placement in p.placements}


def test_core_lists_read_and_print_as_linux_writes_them():
  assert node_env.parse_core_list('0-3,8,10-11') == (0, 1, 2, 3, 8, 10, 11)
  assert node_env.format_cores((11, 0, 1, 2, 3, 8, 10)) == '0-3,8,10-11'
  for bad in ('3-1', '1,1', 'a', '', '1-'):
    with pytest.raises(ValueError):
      node_env.parse_core_list(bad)


def test_auto_gives_learner_replay_and_each_actor_their_own_cores():
  p = plan(range(16), actors=14)
  by_node = cores(p)
  own = [by_node[n] for n in ['learner/0', 'replay/0'] +
         [f'actor/{i}' for i in range(14)]]
  assert all(len(c) == 1 for c in own)
  flat = [c for node_cores in own for c in node_cores]
  assert len(set(flat)) == len(flat) == 16  # Disjoint, within the host.
  # No core left for the counter and evaluator: they share the replay's.
  assert by_node['counter/0'] == by_node['evaluator/0'] == by_node['replay/0']
  for placement in p.placements:
    env = placement.env
    assert env['ACME_LAUNCH_CPUS'] == node_env.format_cores(placement.cores)
    assert env['OMP_NUM_THREADS'] == str(len(placement.cores))
    assert env[node_env.variable('tf_intra_op_threads')] == str(len(placement.cores))
  assert 'cores: pinned' in p.cpu_note


def test_auto_gives_each_actor_a_second_core_and_the_learner_the_rest():
  by_node = cores(plan(range(16), actors=2))
  assert by_node['learner/0'] == tuple(range(10))
  assert by_node['replay/0'] == (10,)
  assert by_node['actor/0'] == (11, 12) and by_node['actor/1'] == (13, 14)
  assert by_node['counter/0'] == by_node['evaluator/0'] == (15,)
  # Two cores, two threads: EnvPool's worker threads (program/build.py).
  actor = plan(range(16), actors=2).placement('actor/0')
  assert actor.threads == 2 and actor.env['OMP_NUM_THREADS'] == '2'


def test_actors_keep_one_core_each_unless_every_actor_can_have_two():
  # 12 cores, 8 actors: 10 own cores and the shared one leave 1 spare,
  # not enough for every actor: the learner takes it.
  by_node = cores(plan(range(12), actors=8))
  assert all(len(by_node[f'actor/{i}']) == 1 for i in range(8))
  assert len(by_node['learner/0']) == 2
  used = [by_node[n] for n in ['learner/0', 'replay/0', 'counter/0'] +
          [f'actor/{i}' for i in range(8)]]
  flat = [c for node_cores in used for c in node_cores]
  assert sorted(flat) == list(range(12))  # Disjoint, every core used.
  # 19 cores: 8 spare, one more for each actor; none left for the learner.
  by_node = cores(plan(range(19), actors=8))
  assert all(len(by_node[f'actor/{i}']) == 2 for i in range(8))
  assert len(by_node['learner/0']) == 1


def test_auto_does_not_pin_when_the_host_is_too_small():
  p = plan(range(2), actors=2)
  assert all(placement.cores == () for placement in p.placements)
  for placement in p.placements:
    assert 'ACME_LAUNCH_CPUS' not in placement.env
    assert 'OMP_NUM_THREADS' not in placement.env
  assert 'not pinned' in p.cpu_note and 'needs 4 cores' in p.cpu_note
  # The same without a host (local_mt, ray): nothing pinned.
  assert all(pl.cores == () for pl in plan(None, actors=2).placements)


def test_counts_and_lists_are_placed_first_and_auto_takes_the_rest():
  p = plan(range(8), actors=2, learner__cpus='4', replay__cpus='7-7')
  by_node = cores(p)
  assert by_node['replay/0'] == (7,)
  assert by_node['learner/0'] == (0, 1, 2, 3)
  assert by_node['actor/0'] == (4,) and by_node['actor/1'] == (5,)
  assert by_node['counter/0'] == by_node['evaluator/0'] == (6,)
  # Core lists place a node where the user says; 'all' leaves it unpinned.
  p = plan(range(8), actors=2, node_overrides='actor/1:cpus=2-3',
           evaluator__cpus='all')
  assert cores(p)['actor/1'] == (2, 3) and cores(p)['evaluator/0'] == ()
  assert p.placement('actor/1').env['ACME_LAUNCH_CPUS'] == '2-3'
  assert p.placement('actor/0').label != p.placement('actor/1').label


def test_oversubscription_is_allowed_only_when_asked():
  with pytest.raises(errors.LaunchError, match='oversubscribe_cpus=true'):
    plan(range(4), actors=2, actor__cpus='2', learner__cpus='2')
  p = plan(range(4), actors=2, actor__cpus='2', learner__cpus='2',
           oversubscribe_cpus=True)
  assert all(len(cores(p)[n]) == 2 for n in ('actor/0', 'actor/1', 'learner/0'))
  with pytest.raises(errors.LaunchError, match='both ask for core 1'):
    plan(range(4), node_overrides='actor/0:cpus=0-1;actor/1:cpus=1-1')
  p = plan(range(4), node_overrides='actor/0:cpus=0-1;actor/1:cpus=1-1',
           oversubscribe_cpus=True)
  assert cores(p)['actor/1'] == (1,)


@pytest.mark.parametrize('host,settings,words', [
    (range(4), {'actor__cpus': '2-5'},
     ['actor/0', 'cores 2-5', 'may use cores 0-3', 'core 4']),
    (range(4), {'learner__cpus': '6'}, ['learner/0', '6 cores', '0-3']),
    (range(4), {'learner__cpus': '0'}, ['config.resources.learner.cpus',
                                        "'0'", "'5-5'"]),
    (range(4), {'actor__cpus': 'many'}, ['config.resources.actor.cpus',
                                         "'0-3,8'", "'many'"]),
    (range(4), {'node_overrides': 'actor/1:cpus=2,2'},
     ['node_overrides actor/1:cpus', 'each core once']),
    (None, {'actor__cpus': '1'}, ['actor/0', 'local_mp', "'auto' or 'all'"]),
])
def test_bad_cpu_input_is_one_clear_line(host, settings, words):
  with pytest.raises(errors.LaunchError) as raised:
    plan(host, **settings)
  message = str(raised.value)
  assert '\n' not in message
  for word in words:
    assert word in message
