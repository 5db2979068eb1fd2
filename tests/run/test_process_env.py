"""A node process's environment: the launcher's, less its credentials."""

from acme_launch.plan import node_env
from acme_launch.run import forkserver
from acme_launch.run import process_env

_SECRETS = {'WANDB_API_KEY': 'k' * 40, 'MLFLOW_TRACKING_URI': 'http://a:b@h:1',
            'AWS_SECRET_ACCESS_KEY': 'aws', 'HF_TOKEN': 'hf',
            'HTTPS_PROXY': 'http://bob:hunter2@proxy:3128'}


def test_nodes_inherit_no_credentials_but_those_their_plan_passes(monkeypatch):
  for name, value in _SECRETS.items():
    monkeypatch.setenv(name, value)
  monkeypatch.setenv('ACME_TEST_PLAIN', 'kept')
  plain = process_env.node_process_env('learner/0', {'JAX_PLATFORMS': 'cpu'},
                                       run_dir='/runs/a')
  assert not set(_SECRETS) & set(plain)
  assert plain['ACME_TEST_PLAIN'] == 'kept' and plain['JAX_PLATFORMS'] == 'cpu'
  assert 'PATH' in plain and 'HOME' in plain

  overrides = node_env.NodeEnv(pass_env=('HF_TOKEN', 'AWS_*')).to_environ()
  passed = process_env.node_process_env('actor/0', overrides, run_dir='/runs/a')
  assert passed['HF_TOKEN'] == 'hf' and passed['AWS_SECRET_ACCESS_KEY'] == 'aws'
  assert 'WANDB_API_KEY' not in passed and 'HTTPS_PROXY' not in passed
  # The fork server holds none of them: a forked node gets its own.
  server = forkserver.server_env(passed)
  assert not set(_SECRETS) & set(server)
  assert forkserver.why_not_forked(passed, server) == ''
