#!/usr/bin/env bash
# Sets everything up (fast when already done), then runs the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k dry_run
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
