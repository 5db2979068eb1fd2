"""Host-loss moves (run/ray/moves.py) without a cluster: the environment a
moved node gets, and the label selector that keeps new actors off lost hosts."""

import dataclasses

from acme_launch.plan import node_env
from acme_launch.run.ray import moves


def test_a_moved_node_gets_its_new_host_addresses_and_where_they_moved_from():
  first = moves.on_host(
      {'PATH': '/bin'}, {'ip': '10.0.0.1', 'ray_node_id': 'a'},
      node_env.NodeEnv(run_dir='/tmp/mirror', mirror_of='/runs/x').to_environ(),
      ['10.0.0.1:5000'], node='actor/0')
  start = moves.NodeStart(['python'], first, 'job.pkl', None, 'log',
                          ['10.0.0.1:5000'])
  moved = moves.on_host(
      start.env, {'ip': '10.0.0.2', 'ray_node_id': 'b'},
      node_env.NodeEnv(run_dir='/runs/x').to_environ(), ['10.0.0.2:6000'],
      moved_from='10.0.0.1',
      moved_addresses=tuple(zip(start.addresses, ['10.0.0.2:6000'])))
  value = node_env.NodeEnv.from_environ(moved)
  assert moved['PATH'] == '/bin'
  assert (value.node, value.run_dir, value.mirror_of) == ('actor/0', '/runs/x', '')
  assert (value.bind_address, value.server_addresses, value.ray_node_id) == (
      '10.0.0.2', ('10.0.0.2:6000',), 'b')
  assert value.moved_addresses == (('10.0.0.1:5000', '10.0.0.2:6000'),)
  argv, env, *_ = dataclasses.replace(start, env=moved).args(restart=2)
  assert argv == ['python'] and node_env.NodeEnv.from_environ(env).restart == 2
  assert node_env.NodeEnv.from_environ(start.args()[1]).restart == 0


def test_new_actors_avoid_every_host_seen_lost():
  lost = moves.LostHosts()
  assert lost.actor_options() == {}
  lost.ids = {'b', 'a'}
  assert lost.actor_options() == {
      'label_selector': {'ray.io/node-id': '!in(a,b)'}}
