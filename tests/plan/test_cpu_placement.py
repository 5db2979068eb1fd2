"""CPU placement: core plans for injected hosts, and what pinned nodes get.

The planner is tested on made-up hosts (16 and 64 cores); the launches run on
this machine's cores and read each node's record (nodes/<node>.json: the
affinity its process reports, and its thread settings).
"""

import os
import subprocess
import sys

import pytest

from acme_launch import errors
from acme_launch.plan import gpu_inventory
from acme_launch.plan import node_env
from tests.conftest import REPO_ROOT, node_records, read_json, run_launcher, user_env
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


@pytest.mark.e2e
def test_a_launcher_sees_only_its_own_cuda_visible_devices(tmp_path):
  inventory_file = os.path.join(REPO_ROOT, 'tests', 'inventories', 'h100x8.json')
  gpus = gpu_inventory.read_inventory(inventory_file)
  assert [g.index for g in gpu_inventory.visible_to_launcher(gpus, '2,5')] == [2, 5]
  assert gpu_inventory.visible_to_launcher(gpus, '') == ()
  assert gpu_inventory.visible_to_launcher(gpus, None) == gpus
  with pytest.raises(errors.LaunchError, match='GPU indices'):
    gpu_inventory.visible_to_launcher(gpus, 'GPU-5f2e')
  # The dry run of a launcher given GPUs 6,7 plans the learner on GPU 6.
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'launch.py'), '--config=smoke',
       '--dry_run', f'--gpu_inventory={inventory_file}'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
      env=user_env({'CUDA_VISIBLE_DEVICES': '6,7'}), check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'GPU 6 NVIDIA H100 80GB HBM3' in result.stdout, result.stdout
  assert 'idle GPUs: 7 (' in result.stdout, result.stdout


@pytest.mark.e2e
def test_pinned_nodes_run_on_their_cores_with_threads_to_match(workdir):
  """A real run pinned by core lists (two cores here, so oversubscribed)."""
  result = run_launcher(
      '--config=smoke', '--config.max_actor_steps=2000',
      '--config.resources.learner.cpus=0-0', '--config.resources.actor.cpus=1-1',
      '--config.resources.replay.cpus=1-1', '--config.resources.counter.cpus=0-1',
      '--config.resources.evaluator.cpus=all',
      '--config.resources.oversubscribe_cpus=true',
      f'--workdir={workdir}', '--run_name=pinned')
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = os.path.join(workdir, 'pinned')
  plan_rows = {p['node']: p for p in
               read_json(os.path.join(run_dir, 'config.json'))['resource_plan']}
  records = node_records(run_dir)
  launcher_cores = node_env.format_cores(os.sched_getaffinity(0))
  expected = {'learner/0': '0', 'actor/0': '1', 'replay/0': '1',
              'counter/0': '0-1', 'evaluator/0': launcher_cores}
  for node, affinity in expected.items():
    assert records[node]['cpu_affinity'] == affinity, node
    planned = plan_rows[node]['cores']
    assert node_env.format_cores(planned) == (affinity if planned else '')
  assert records['learner/0']['tf_intra_op_threads'] == 1
  assert records['learner/0']['env']['OMP_NUM_THREADS'] == '1'
  assert records['counter/0']['tf_inter_op_threads'] == 2
  assert records['evaluator/0']['tf_intra_op_threads'] == 0  # Not pinned.
  assert read_json(os.path.join(run_dir, 'summary.json'))['exit_reason'] == (
      'budget_reached')


@pytest.mark.e2e
def test_a_launcher_given_one_core_plans_within_it(workdir):
  """What a sweep does: the launcher's affinity is the host it plans on."""
  command = [sys.executable, os.path.join(REPO_ROOT, 'launch.py'),
             '--config=smoke', '--config.max_actor_steps=2000',
             '--config.resources.actor.cpus=1-1',
             f'--workdir={workdir}', '--run_name=slice']
  refused = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=300, env=user_env(), check=False,
                           preexec_fn=lambda: os.sched_setaffinity(0, {0}))
  assert refused.returncode == 2
  lines = [l for l in refused.stderr.splitlines() if l.strip()]
  assert len(lines) == 1 and 'may use cores 0' in lines[0], lines
  assert not os.path.exists(os.path.join(workdir, 'slice'))
  command[-3] = '--config.resources.actor.cpus=0-0'
  result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, env=user_env(), check=False,
                          preexec_fn=lambda: os.sched_setaffinity(0, {0}))
  assert result.returncode == 0, result.stderr[-3000:]
  records = node_records(os.path.join(workdir, 'slice'))
  assert {r['cpu_affinity'] for r in records.values()} == {'0'}
