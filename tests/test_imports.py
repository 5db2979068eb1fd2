"""`import acme_launch` and the planning code stay light and side-effect free."""

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

_HEAVY = ('jax', 'acme', 'launchpad', 'tensorflow', 'reverb', 'gym', 'wandb',
          'mlflow')

_PROBE = f'''
import os, sys, warnings
before = (dict(os.environ), list(warnings.filters))
import acme_launch
import acme_launch.config, acme_launch.config.options
import acme_launch.config.registry, acme_launch.config.schema
import acme_launch.plan, acme_launch.plan.resources, acme_launch.plan.topology
import acme_launch.plan.gpu_inventory, acme_launch.plan.node_env
import acme_launch.plan.replay_memory
import acme_launch.layout, acme_launch.errors
import acme_launch.tracking, acme_launch.tracking.run
heavy = [m for m in {_HEAVY!r} if m in sys.modules]
assert not heavy, heavy
assert (dict(os.environ), list(warnings.filters)) == before, 'side effects'
print('ok')
'''


def test_package_and_planning_code_import_no_stack():
  env = {k: v for k, v in os.environ.items() if k != 'JAX_PLATFORMS'}
  result = subprocess.run([sys.executable, '-c', _PROBE], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == 'ok'
