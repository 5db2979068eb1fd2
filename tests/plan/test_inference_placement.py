"""The central inference node in the plan: its GPU (its own, or the
learner's on a one-GPU host, within the GPU's memory), its cores, its place
among the nodes (the dry run: tests/e2e/test_inference.py)."""

import pytest

from acme_launch import errors
from acme_launch.plan import table
from acme_launch.plan import topology
from tests.plan.test_resources import plan

NODES = topology.node_list(4, 1, inference=True)


def test_the_node_follows_the_learner_and_restarts():
  assert NODES[:4] == [('replay', 0), ('counter', 0), ('learner', 0),
                       ('inference', 0)]
  assert ('inference', 0) not in topology.node_list(4, 1)
  assert topology.restartable('inference/0')
  assert not topology.saves_on_stop('inference/0')


def test_on_a_one_gpu_host_it_shares_the_learners_gpu():
  p = plan('h100x1', nodes=NODES)
  node = p.placement('inference/0')
  assert node.gpus == p.placement('learner/0').gpus == (0,)
  assert node.env['JAX_PLATFORMS'] == 'cuda,cpu'
  assert node.env['XLA_PYTHON_CLIENT_MEM_FRACTION'] == '0.1'
  (usage,) = p.gpu_usage
  assert usage.nodes == ('learner/0', 'inference/0')
  # 0.75 and 0.1 of 81,559 MB, and a CUDA context each.
  assert usage.planned_mb == 61169 + 500 + 8156 + 500
  for actor in range(4):
    assert p.placement(f'actor/{actor}').gpus == ()
  assert 'inference/0' in table.format_plan(p)


def test_with_gpus_to_spare_it_takes_one_the_learner_leaves():
  p = plan('h100x8', nodes=NODES)
  assert p.placement('learner/0').gpus == (0,)
  assert p.placement('inference/0').gpus == (1,)


def test_without_a_gpu_it_runs_on_the_cpu():
  node = plan(nodes=NODES).placement('inference/0')
  assert node.gpus == ()
  assert node.env['CUDA_VISIBLE_DEVICES'] == ''


def test_a_node_that_does_not_fit_beside_the_learner_is_one_line():
  with pytest.raises(errors.LaunchError) as raised:
    plan('h100x1', nodes=NODES, inference__jax_mem_fraction=0.3)
  message = str(raised.value)
  assert '\n' not in message
  assert 'GPU 0 (NVIDIA H100 80GB HBM3, 81559 MB) is over-committed' in message
  assert 'learner/0 61669 + inference/0 24968' in message


def test_it_gets_cores_of_its_own_and_a_second_as_actors_do():
  p = plan(nodes=NODES, host_cores=range(16))
  cores = {placement.node: placement.cores for placement in p.placements}
  assert len(cores['inference/0']) == 2
  assert all(len(cores[f'actor/{i}']) == 2 for i in range(4))
  taken = [c for node in ('learner/0', 'replay/0', 'inference/0') +
           tuple(f'actor/{i}' for i in range(4)) for c in cores[node]]
  # 15 cores; the counter and the evaluator share the 16th.
  assert len(taken) == len(set(taken)) == 15
  # On 7 cores: one each for the learner, the replay, the node and actors.
  p = plan(nodes=NODES, host_cores=range(7))
  assert all(len(placement.cores) == 1 for placement in p.placements)
  small = plan(nodes=NODES, host_cores=range(2))
  assert 'the inference node' in small.cpu_note
