"""`import acme_launch` and the planning code stay light and side-effect free."""

import ast
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


def _imported_names(path: str):
  """(module imported from, name) for every `from X import name` in the file
  at `path`, at any depth (inside functions and TYPE_CHECKING too)."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  package = os.path.relpath(os.path.dirname(path), REPO_ROOT).replace(os.sep, '.')
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
      module = node.module or ''
      if node.level:
        base = package.split('.')[:len(package.split('.')) - node.level + 1]
        module = '.'.join(base + ([module] if module else []))
      for alias in node.names:
        yield module, alias.name


def test_no_private_name_is_imported_across_modules():
  """A name another module needs is public: no `from acme_launch.X import _y`
  anywhere in the package (tests may reach into a module they test)."""
  found = []
  for folder, _, files in os.walk(os.path.join(REPO_ROOT, 'acme_launch')):
    for name in files:
      if name.endswith('.py'):
        path = os.path.join(folder, name)
        found += [f'{os.path.relpath(path, REPO_ROOT)}: {module}.{imported}'
                  for module, imported in _imported_names(path)
                  if module.startswith('acme_launch') and
                  imported.startswith('_') and not imported.startswith('__')]
  assert not found, found
