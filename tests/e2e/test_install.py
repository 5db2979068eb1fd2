"""The checkout installs as a package with the `acme-launch` command."""

import site
import subprocess
import sys


from tests.conftest import REPO_ROOT, user_env



def test_installed_command_finds_the_shipped_configs(tmp_path):
  venv = tmp_path / 'venv'
  subprocess.run([sys.executable, '-m', 'venv', '--system-site-packages',
                  str(venv)], check=True)
  # The throwaway venv sees the locked stack of the one running the tests.
  packages = venv / 'lib' / f'python{sys.version_info.major}.{sys.version_info.minor}' / 'site-packages'
  (packages / 'lock.pth').write_text(site.getsitepackages()[0] + '\n')
  install = subprocess.run(
      [str(venv / 'bin' / 'pip'), 'install', '--quiet', '--no-deps',
       '--no-build-isolation', '-e', REPO_ROOT],
      capture_output=True, text=True, check=False, cwd=tmp_path)
  assert install.returncode == 0, install.stderr[-2000:]
  command = str(venv / 'bin' / 'acme-launch')
  listing = subprocess.run([command, '--list_configs'], capture_output=True,
                           text=True, check=False, cwd=tmp_path,
                           env=user_env())
  assert listing.returncode == 0, listing.stderr[-2000:]
  assert listing.stdout.split()[0] == 'd4pg_mujoco' and 'smoke' in listing.stdout
  dry_run = subprocess.run(
      [command, '--config=smoke', '--dry_run', f'--workdir={tmp_path}'],
      capture_output=True, text=True, check=False, cwd=tmp_path,
      env=user_env())
  assert dry_run.returncode == 0, dry_run.stderr[-2000:]
  assert 'dry run: nothing was started.' in dry_run.stdout
