"""Runs of the smoke config that several e2e modules read, made once.

`trained` is a run to BUDGET_A (its own temp folder beside it) and
`resumed` a copy of it resumed to BUDGET_B (test_checkpointing.py reads
their checkpoints). `trained` films its first and final evaluations' first
episodes (VIDEO, small frames; test_evaluate.py reads them). Both run with
--tracking=wandb,mlflow, W&B offline and MLflow in the run directory's file
store (test_tracking.py reads those back): tracking costs them a few
seconds where runs of their own would cost a minute or more. No test
sends traffic beyond this machine: TRACKING_ENV keeps W&B offline.
"""

import glob
import os
import shutil

import pytest

from tests.conftest import read_json, run_launcher

BUDGET_A, BUDGET_B = 3000, 6000
TRACKING = '--tracking=wandb,mlflow'
# The first evaluation's first episode and the final one's, 64 x 64.
VIDEO = ('--config.eval_video_every=1000', '--config.eval_video_size=64')


def tracking_env(home: str) -> dict:
  """W&B offline and quiet, its folders under `home`; MLflow's default."""
  return {'WANDB_MODE': 'offline', 'WANDB_SILENT': 'true',
          'WANDB_ERROR_REPORTING': 'false', 'WANDB_CONFIG_DIR': home,
          'WANDB_CACHE_DIR': home, 'WANDB_DATA_DIR': home,
          'MLFLOW_TRACKING_URI': ''}


def resume(run_dir, *args):
  """--resume of `run_dir` (its trackers go on, offline)."""
  return run_launcher('--config=smoke', f'--resume={run_dir}', *args,
                      env=tracking_env(os.path.join(os.path.dirname(run_dir),
                                                    'wandb-home')))


def learner_checkpoints(run_dir):
  return sorted(glob.glob(os.path.join(run_dir, 'checkpoints', 'learner',
                                       'ckpt-*.index')))


def temp_folder(workdir: str) -> str:
  """The TMPDIR that `trained`'s launcher ran with, beside its run."""
  return os.path.join(workdir, 'tmp')


@pytest.fixture(scope='session')
def trained(tmp_path_factory):
  """A run directory trained to BUDGET_A (checkpoints saved at the end),
  tracked. Tests copy it before launching on it."""
  workdir = str(tmp_path_factory.mktemp('trained'))
  os.mkdir(temp_folder(workdir), mode=0o700)
  result = run_launcher('--config=smoke', f'--config.max_actor_steps={BUDGET_A}',
                        f'--workdir={workdir}', '--run_name=run', TRACKING,
                        *VIDEO,
                        env={**tracking_env(os.path.join(workdir, 'wandb-home')),
                             'TMPDIR': temp_folder(workdir)})
  assert result.returncode == 0, result.stderr[-2000:]
  return os.path.join(workdir, 'run')


@pytest.fixture(scope='session')
def resumed(trained, tmp_path_factory):
  """(run directory, first run's summary, its newest learner digest, resume
  result): a copy of `trained` resumed to BUDGET_B."""
  run_dir = str(tmp_path_factory.mktemp('resumed') / 'run')
  shutil.copytree(trained, run_dir)
  first = read_json(os.path.join(run_dir, 'summary.json'))
  with open(learner_checkpoints(run_dir)[-1].replace('.index', '.digest')) as f:
    saved_digest = f.read()
  result = resume(run_dir, f'--config.max_actor_steps={BUDGET_B}')
  return run_dir, first, saved_digest, result


@pytest.fixture(scope='module')
def cli_module():
  """acme_launch.prepare, for tests that decide a launch in this process
  as the launcher would (its --dry_run text, its one-line refusals):
  imported as launch.py runs it, the launcher's own JAX on the CPU."""
  saved = {k: os.environ.get(k) for k in ('JAX_PLATFORMS',
                                          'TF_CPP_MIN_LOG_LEVEL')}
  os.environ['JAX_PLATFORMS'] = 'cpu'
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from acme_launch import prepare
  yield prepare
  for key, value in saved.items():
    if value is None:
      os.environ.pop(key, None)
    else:
      os.environ[key] = value


def dry_run_stdout(prepare, *args) -> str:
  """What `launch.py ARGS --dry_run` prints, decided in this process (the
  launcher prints this text)."""
  from acme_launch import describe
  return describe.dry_run_text(
      prepare.check_arguments(['launch.py', *args, '--dry_run'])) + '\n'
