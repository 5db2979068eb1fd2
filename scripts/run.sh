#!/usr/bin/env bash
# Sets everything up (fast when already done), then launches an experiment.
# With no arguments it runs the default: --config=ppo_mujoco.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "$#" -eq 0 ]; then set -- --config=ppo_mujoco; fi
exec .venv/bin/python launch.py "$@"
