"""scripts/bundle.sh and install_bundle.sh: the offline bundle for hosts
without network, built from this test's own venv and installed into a fresh
directory, with the original interpreter and checkout hidden (a private mount
namespace) so that nothing can quietly fall back on them.

The full bundle is packed without compression (`--xz_level=none`): xz -0 takes
over 4 minutes for the 2.7 GB venv on this 2-core machine. The xz path, and
the refusals, use a small bundle of the same interpreter with an empty venv.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, read_json, user_env


BUNDLE = os.path.join(REPO_ROOT, 'scripts', 'bundle.sh')


def _bundle(*args, venv=sys.prefix):
  return subprocess.run([BUNDLE, f'--venv={venv}', *args], capture_output=True,
                        text=True, check=False, env=user_env(), timeout=600)


def _error_lines(result):
  return [line for line in result.stderr.splitlines() if line.strip()]


def _hiding(paths, empty):
  """A command prefix that runs its command with `paths` covered by `empty`
  (unshare -m, or -rm where unprivileged), or [] where neither works here."""
  mounts = ' && '.join(f'mount --bind {empty} {p}' for p in paths)
  for flags in ('-m', '-rm'):
    prefix = ['unshare', flags, 'sh', '-c', f'{mounts} && exec "$@"', 'sh']
    try:
      probe = subprocess.run([*prefix, 'true'], capture_output=True, check=False)
    except FileNotFoundError:
      return []
    if probe.returncode == 0:
      return prefix
  return []


@pytest.fixture(scope='module')
def small_bundle(tmp_path_factory):
  """This interpreter with an empty venv, xz -0, 4 MiB parts."""
  base = tmp_path_factory.mktemp('small')
  venv = base / 'venv'
  subprocess.run([os.path.join(sys.base_prefix, 'bin', 'python3.10'), '-m',
                  'venv', '--without-pip', str(venv)], check=True)
  result = _bundle('--xz_level=0', '--part_size=4M', str(base / 'out'),
                   venv=str(venv))
  assert result.returncode == 0, result.stderr
  yield base / 'out'
  shutil.rmtree(base)


def _parts(bundle_dir):
  with open(os.path.join(bundle_dir, 'MANIFEST.sha256')) as f:
    return [line.split()[1] for line in f]


def _install(bundle_dir, dest, prefix=()):
  return subprocess.run(
      [*prefix, 'bash', os.path.join(bundle_dir, 'install_bundle.sh'), str(dest)],
      capture_output=True, text=True, check=False, env=user_env(), timeout=600)


def _left_behind(dest):
  parent = os.path.dirname(dest)
  return [n for n in os.listdir(parent)
          if n.startswith(os.path.basename(dest))]


def test_the_full_bundle_installs_into_a_fresh_directory_and_runs_the_smoke_config_there(
    tmp_path_factory):
  base = tmp_path_factory.mktemp('full')
  try:
    result = _bundle('--xz_level=none', '--part_size=512M', str(base / 'out'))
    assert result.returncode == 0, result.stderr
    parts = _parts(base / 'out')
    assert len(parts) > 1
    assert all(p == f'acme-launch-bundle.tar.{i:03d}' for i, p in enumerate(parts))
    assert {os.path.getsize(base / 'out' / p) for p in parts[:-1]} == {512 << 20}

    empty = base / 'empty'
    empty.mkdir()
    dest = base / 'installed'
    hidden = [p for p in (sys.base_prefix, REPO_ROOT)
              if not str(dest).startswith(p + os.sep)]
    hide = _hiding(hidden, empty)
    result = _install(base / 'out', dest, hide)
    assert result.returncode == 0, result.stderr
    assert _left_behind(dest) == ['installed']
    info = read_json(dest / 'bundle.json')
    assert info['jax_build'] == 'cpu' and info['python_version'].startswith('3.10.')

    # The installed venv runs on the bundled interpreter and its libpython.
    venv_python = str(dest / 'acme-launch' / '.venv' / 'bin' / 'python')
    probe = subprocess.run(
        [*hide, venv_python, '-c',
         'import sys; print(sys.base_prefix); print(sys.prefix);'
         'print([l.split()[-1] for l in open("/proc/self/maps") if "libpython" in l][0])'],
        capture_output=True, text=True, check=True)
    base_prefix, prefix, libpython = probe.stdout.split('\n')[:3]
    assert base_prefix == str(dest / 'python')
    assert prefix == str(dest / 'acme-launch' / '.venv')
    assert libpython.startswith(str(dest / 'python') + '/lib/')

    # README's command there: setup keeps the bundled venv, then the launch.
    runs = base / 'runs'
    result = subprocess.run(
        [*hide, 'scripts/run.sh', '--config=smoke',
         '--config.max_actor_steps=2000', f'--workdir={runs}', '--run_name=s'],
        cwd=dest / 'acme-launch', capture_output=True, text=True, check=False,
        env=user_env(), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'came from an offline bundle (JAX build: cpu' in result.stderr
    summary = read_json(runs / 's' / 'summary.json')
    assert summary['exit_reason'] == 'budget_reached'
    assert summary['actor_steps'] == 2000 and summary['learner_steps'] > 0
    learner = read_json(runs / 's' / 'nodes' / 'learner_0.json')
    # The loopback shim carried in the venv took effect there too.
    assert learner['bind_address'] == 'loopback'
    assert learner['jax_platform'] == 'cpu'
  finally:
    shutil.rmtree(base)


def test_a_missing_part_is_named_in_one_line_and_nothing_is_installed(
    small_bundle, tmp_path):
  bundle = tmp_path / 'bundle'
  shutil.copytree(small_bundle, bundle)
  missing = _parts(bundle)[2]
  os.remove(bundle / missing)
  result = _install(bundle, tmp_path / 'dest')
  assert result.returncode == 2
  assert _error_lines(result) == [
      f'acme-launch: error: bundle part {missing} is missing from {bundle}']
  assert _left_behind(tmp_path / 'dest') == []


def test_a_corrupt_part_is_named_in_one_line_and_nothing_is_installed(
    small_bundle, tmp_path):
  bundle = tmp_path / 'bundle'
  shutil.copytree(small_bundle, bundle)
  corrupt = _parts(bundle)[1]
  with open(bundle / corrupt, 'r+b') as f:
    f.seek(1000)
    byte = f.read(1)
    f.seek(1000)
    f.write(bytes([byte[0] ^ 0xFF]))
  result = _install(bundle, tmp_path / 'dest')
  assert result.returncode == 2
  assert _error_lines(result) == [
      f'acme-launch: error: bundle part {corrupt} is corrupt (sha256 differs '
      'from MANIFEST.sha256)']
  assert _left_behind(tmp_path / 'dest') == []


def test_an_xz_bundle_that_cannot_import_the_project_unpacks_checks_and_leaves_nothing(
    small_bundle, tmp_path):
  # Its venv is empty: the parts verify, xz unpacks them, the relocated
  # interpreter runs and finds no jax, and nothing is left behind.
  assert len(_parts(small_bundle)) > 1
  result = _install(small_bundle, tmp_path / 'dest')
  assert result.returncode == 1
  lines = _error_lines(result)
  assert lines[-1].startswith('acme-launch: error: the bundled Python cannot '
                              'import the project here; nothing installed: '
                              'ModuleNotFoundError')
  assert _left_behind(tmp_path / 'dest') == []


def test_an_existing_destination_is_refused(small_bundle, tmp_path):
  (tmp_path / 'dest').mkdir()
  result = _install(small_bundle, tmp_path / 'dest')
  assert result.returncode == 2
  assert _error_lines(result) == [
      f'acme-launch: error: {tmp_path}/dest already exists: choose a new directory']


def _no_nvidia_driver_here() -> bool:
  return (not os.path.exists('/proc/driver/nvidia/version') and
          shutil.which('nvidia-smi') is None)


def _as_cuda_bundle(small_bundle, bundle, from_host=()):
  """A copy of the small bundle whose BUNDLE.json says it holds the CUDA
  build (what `--cuda=minimal` writes), to see the installer's host checks."""
  shutil.copytree(small_bundle, bundle)
  info = read_json(bundle / 'BUNDLE.json')
  assert info['jax_build'] == 'cpu' and info['from_host'] == []
  info.update(jax_build='cuda12-minimal', from_host=list(from_host))
  with open(bundle / 'BUNDLE.json', 'w') as f:
    json.dump(info, f)


def _planted_nvidia_smi(tmp_path, driver):
  """A PATH whose first folder holds an `nvidia-smi` that reports `driver`:
  a host with that NVIDIA driver, as far as the installer can tell."""
  tools = tmp_path / 'tools'
  tools.mkdir()
  (tools / 'nvidia-smi').write_text(f'#!/bin/sh\necho {driver}\n')
  (tools / 'nvidia-smi').chmod(0o755)
  return dict(user_env(), PATH=f'{tools}:{os.environ["PATH"]}')


@pytest.mark.skipif(not _no_nvidia_driver_here(), reason='an NVIDIA driver is here')
def test_a_cuda_bundle_on_a_host_without_a_driver_is_one_line_exit_2(
    small_bundle, tmp_path):
  _as_cuda_bundle(small_bundle, tmp_path / 'bundle')
  result = _install(tmp_path / 'bundle', tmp_path / 'dest')
  assert result.returncode == 2
  assert _error_lines(result) == [
      "acme-launch: error: this bundle holds JAX's CUDA 12 build, and this host "
      'shows no NVIDIA driver (no /proc/driver/nvidia/version, no nvidia-smi): '
      'install the driver, or a CPU bundle']
  assert _left_behind(tmp_path / 'dest') == []


@pytest.mark.skipif(os.path.exists('/proc/driver/nvidia/version'),
                    reason='this host has an NVIDIA kernel module')
@pytest.mark.parametrize('driver, from_host, message', [
    ('470.82.01', (), "which needs NVIDIA driver 525.60.13 or newer; this host "
     'has 470.82.01'),
    ('580.95.05', ('cudnn',), 'takes cuDNN from the host (packed with '
     '--cuda_from_host=cudnn), and this host has no libcudnn.so.9'),
])
def test_a_cuda_bundle_the_host_cannot_run_is_one_line_exit_2(
    small_bundle, tmp_path, driver, from_host, message):
  if from_host and 'libcudnn.so.9 ' in subprocess.run(
      ['ldconfig', '-p'], capture_output=True, text=True, check=False).stdout:
    pytest.skip('this host has a libcudnn.so.9')
  _as_cuda_bundle(small_bundle, tmp_path / 'bundle', from_host)
  result = subprocess.run(
      ['bash', str(tmp_path / 'bundle' / 'install_bundle.sh'),
       str(tmp_path / 'dest')], capture_output=True, text=True, check=False,
      env=_planted_nvidia_smi(tmp_path, driver), timeout=60)
  assert result.returncode == 2
  lines = _error_lines(result)
  assert len(lines) == 1 and message in lines[0], lines
  assert _left_behind(tmp_path / 'dest') == []


def test_cuda_minimal_refuses_a_venv_that_holds_the_cuda_build(tmp_path):
  venv = tmp_path / 'venv'
  subprocess.run([os.path.join(sys.base_prefix, 'bin', 'python3.10'), '-m',
                  'venv', '--without-pip', str(venv)], check=True)
  plugin = venv / 'lib' / 'python3.10' / 'site-packages' / 'jax_cuda12_plugin'
  plugin.mkdir(parents=True)
  (plugin / '__init__.py').write_text('')
  result = _bundle('--cuda=minimal', str(tmp_path / 'out'), venv=str(venv))
  assert result.returncode == 2
  assert _error_lines(result) == [
      f'acme-launch: error: --cuda=minimal adds to a CPU venv; {venv} already '
      "holds JAX's CUDA build"]
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('args, message', [
    (['--xz_level=10'], '--xz_level must be 0-9 or none'),
    (['--part_size=60MB'], '--part_size must be a number'),
    (['--compress'], 'unknown option --compress'),
    (['--cuda=full'], '--cuda must be none or minimal'),
    (['--cuda_from_host=cudnn'], '--cuda_from_host=cudnn goes with --cuda=minimal'),
    (['--cuda=minimal', '--cuda_from_host=nccl'], '--cuda_from_host takes cudnn'),
    ([], 'usage: scripts/bundle.sh'),
])
def test_bad_bundle_options_are_one_line_exit_2(tmp_path, args, message):
  out = [str(tmp_path / 'out')] if args else []
  result = _bundle(*args, *out)
  assert result.returncode == 2
  lines = _error_lines(result)
  assert len(lines) == 1 and lines[0].startswith('acme-launch: error: ')
  assert message in lines[0]
  assert not (tmp_path / 'out').exists()
