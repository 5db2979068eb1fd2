"""The Python API refuses the run directories the CLI refuses, with the same
line (a LaunchError), before anything starts or is written; its runs are in
tests/e2e/test_own_agents.py."""

import json
import os
import sys

import pytest

import acme_launch
from acme_launch import errors
from acme_launch.config import registry


@pytest.mark.parametrize('name', ['..', 'a/b', 'a[1]'])
def test_bad_run_names_are_refused(tmp_path, name):
  with pytest.raises(errors.LaunchError) as raised:
    acme_launch.launch(registry.load('smoke'), workdir=str(tmp_path),
                       run_name=name)
  assert str(raised.value).startswith(f'--run_name={name!r} is refused')
  assert os.listdir(tmp_path) == []


def test_resume_of_an_open_run_directory_reads_nothing_from_it(tmp_path):
  run_dir = tmp_path / 'run'
  run_dir.mkdir()
  (run_dir / 'config.json').write_text(json.dumps(
      {'config': {'agent': 'planted'}, 'python_path': [str(tmp_path)]}))
  os.chmod(run_dir, 0o777)
  for call in (acme_launch.launch, acme_launch.dry_run):
    with pytest.raises(errors.LaunchError) as raised:
      call(resume=str(run_dir))
    assert str(raised.value) == (
        f'--resume={run_dir}: run directory {run_dir} is writable by others '
        '(mode 0777): refused, they could change what a run reads there')
  assert str(tmp_path) not in sys.path
