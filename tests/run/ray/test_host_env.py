"""A Ray host's node process: its worker's environment less credentials."""

import json
import sys
import time

from acme_launch.plan import node_env
from acme_launch.run.ray import host as ray_host

_PRINT_ENV = 'import json, os; print(json.dumps(sorted(os.environ)))'


def test_a_node_started_on_a_ray_host_gets_no_credentials_but_passed_ones(
    tmp_path, monkeypatch):
  for name in ('WANDB_API_KEY', 'AWS_SECRET_ACCESS_KEY', 'HF_TOKEN'):
    monkeypatch.setenv(name, 'secret')
  monkeypatch.setenv('ACME_TEST_PLAIN', 'kept')
  log = tmp_path / 'actor_0.log'
  host = ray_host.NodeHost('actor/0')
  try:
    host.start([sys.executable, '-c', _PRINT_ENV],
               node_env.NodeEnv(pass_env=('HF_TOKEN',)).to_environ(),
               str(tmp_path / 'job.pkl'), b'', str(log))
    deadline = time.time() + 60
    while host.poll() is None and time.time() < deadline:
      time.sleep(0.1)
    assert host.poll() == 0, log.read_text()
  finally:
    host.kill()
  names = set(json.loads(log.read_text().strip().splitlines()[-1]))
  assert {'ACME_TEST_PLAIN', 'HF_TOKEN'} <= names
  assert not names & {'WANDB_API_KEY', 'AWS_SECRET_ACCESS_KEY'}
