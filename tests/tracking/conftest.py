"""Shared by the tracker tests: W&B as the launcher's tracker runs it in a
test, offline and quiet."""

import pytest


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
  """W&B offline and quiet, its folders under tmp_path/home: nothing leaves
  this machine."""
  for name, value in {'WANDB_MODE': 'offline', 'WANDB_SILENT': 'true',
                      'WANDB_ERROR_REPORTING': 'false'}.items():
    monkeypatch.setenv(name, value)
  for name in ('WANDB_CONFIG_DIR', 'WANDB_CACHE_DIR', 'WANDB_DATA_DIR'):
    monkeypatch.setenv(name, str(tmp_path / 'home'))
