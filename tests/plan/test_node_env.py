"""The launcher-to-node contract: one typed value through the environment."""

import pytest

from acme_launch import errors
from acme_launch.plan import node_env


def test_round_trip_through_strings():
  value = node_env.NodeEnv(
      cpus=(0, 1, 2, 5), tf_gpu='limit:2048', tf_intra_op_threads=4,
      node='actor/3', run_dir='/runs/a', mirror_of='/launcher/a', restart=2,
      pdb=True, bind_address='10.0.0.2',
      server_addresses=('10.0.0.2:1234', '10.0.0.2:1235'), ray_node_id='abc',
      moved_from='10.0.0.1', moved_addresses=(('10.0.0.1:9', '10.0.0.2:9'),))
  environ = value.to_environ()
  assert all(isinstance(v, str) for v in environ.values())
  assert all(k.startswith(node_env.PREFIX) for k in environ)
  assert environ[node_env.variable('cpus')] == '0-2,5'
  assert node_env.NodeEnv.from_environ(environ) == value


def test_unset_fields_are_not_written_and_read_as_defaults():
  assert node_env.NodeEnv().to_environ() == {}
  assert node_env.NodeEnv.from_environ({'PATH': '/bin'}) == node_env.NodeEnv()


def test_updated_keeps_other_variables_and_the_plans_fields():
  plan_env = {'CUDA_VISIBLE_DEVICES': '', **node_env.NodeEnv(
      cpus=(3,), tf_gpu='none').to_environ()}
  env = node_env.updated(plan_env, node='learner/0', restart=1)
  assert env['CUDA_VISIBLE_DEVICES'] == ''
  value = node_env.NodeEnv.from_environ(env)
  assert (value.cpus, value.tf_gpu, value.node, value.restart) == (
      (3,), 'none', 'learner/0', 1)


@pytest.mark.parametrize('field,text', [
    ('cpus', '0-x'), ('tf_gpu', 'lots'), ('restart', '-1'),
    ('moved_addresses', 'nonsense')])
def test_a_malformed_variable_is_one_line_naming_it(field, text):
  with pytest.raises(errors.LaunchError, match=node_env.variable(field)):
    node_env.NodeEnv.from_environ({node_env.variable(field): text})
