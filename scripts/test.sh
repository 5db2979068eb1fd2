#!/usr/bin/env bash
# Sets everything up (fast when already done), lints, then runs the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k dry_run
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
# Lint (a few seconds; pyproject.toml): pyflakes' rules and likely bugs
# (ruff), then the import layers and no import cycles (lint-imports).
if [ -x .venv/bin/ruff ]; then
  .venv/bin/ruff check --quiet .
  .venv/bin/lint-imports --no-cache --no-logo --config pyproject.toml > /dev/null \
    || .venv/bin/lint-imports --no-cache --no-logo --config pyproject.toml
else
  echo "acme-launch: no linters in .venv (an offline bundle's venv): lint skipped" >&2
fi
# Two workers (pytest-xdist): e2e tests wait on processes much of the time.
# A file's tests share a worker (its module fixtures are made once); the
# namespace-cluster test files run on one worker, one after another
# (tests/conftest.py).
# ACME_LAUNCH_TEST_WORKERS=0 runs them in this process.
workers=${ACME_LAUNCH_TEST_WORKERS:-2}
if [ "$workers" = 0 ] || ! .venv/bin/python -c 'import xdist' 2>/dev/null; then
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
