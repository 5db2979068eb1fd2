"""scripts/setup.sh's choice of JAX build, under a faked nvidia-smi."""

import os
import subprocess

import pytest

from tests.conftest import REPO_ROOT



def _choose(tmp_path, nvidia_smi_output=None, **env):
  bin_dir = tmp_path / 'bin'
  bin_dir.mkdir(exist_ok=True)
  if nvidia_smi_output is not None:
    fake = bin_dir / 'nvidia-smi'
    fake.write_text('#!/bin/sh\ncat <<"EOF"\n' + nvidia_smi_output + 'EOF\n')
    fake.chmod(0o755)
  environment = {'PATH': f'{bin_dir}:/usr/bin:/bin', **env}
  return subprocess.run([os.path.join(REPO_ROOT, 'scripts', 'choose_jax.sh')],
                        capture_output=True, text=True, env=environment,
                        check=False)


def test_a_listed_nvidia_gpu_chooses_the_cuda12_build(tmp_path):
  result = _choose(tmp_path, 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n'
                             'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n')
  assert result.returncode == 0
  build, reason = result.stdout.rstrip('\n').split('\t')
  assert build == 'cuda12' and 'lists 2 NVIDIA GPU' in reason


@pytest.mark.parametrize('output', [None, ''])
def test_no_gpu_chooses_the_cpu_build(tmp_path, output):
  result = _choose(tmp_path, output)
  assert result.returncode == 0
  assert result.stdout.split('\t')[0] == 'cpu'


def test_acme_launch_jax_overrides_the_choice(tmp_path):
  gpu = 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n'
  assert _choose(tmp_path, gpu, ACME_LAUNCH_JAX='cpu').stdout.startswith('cpu\t')
  assert _choose(tmp_path, None, ACME_LAUNCH_JAX='cuda12').stdout.startswith(
      'cuda12\t')


def test_an_unknown_acme_launch_jax_is_one_line_exit_2_and_installs_nothing(tmp_path):
  venv = tmp_path / 'venv'
  result = subprocess.run(
      [os.path.join(REPO_ROOT, 'scripts', 'setup.sh')], capture_output=True,
      text=True, check=False, cwd=REPO_ROOT,
      env={**os.environ, 'ACME_LAUNCH_JAX': 'rocm', 'ACME_LAUNCH_VENV': str(venv)})
  assert result.returncode == 2
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert lines == ["acme-launch: error: ACME_LAUNCH_JAX must be cpu or cuda12, "
                   "not 'rocm'"]
  assert not venv.exists()
