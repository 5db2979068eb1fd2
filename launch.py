"""Launches an Acme experiment as a Launchpad program: see README.md.

    python launch.py --config=ppo_mujoco [--config.num_actors=4] [--dry_run]
    python launch.py --config=ppo_mujoco --sweep=seed=0,1,2,3 [--max_concurrent=2]
    python launch.py --resume=RUN_DIR_OR_SWEEP_DIR
    python launch.py --config=ppo_mujoco --tracking=wandb,mlflow   (docs/tracking.md)
"""

import os

# The launcher itself computes nothing: keep its JAX and TF off any GPU.
# Each node's process gets its own settings from the resource plan.
os.environ['JAX_PLATFORMS'] = 'cpu'
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TF's dso-loader lines.

from acme_launch import quiet
quiet.quiet_third_party()  # Before gym, TF, JAX or Reverb are imported.
from acme_launch import cli

if __name__ == '__main__':
  cli.run()
