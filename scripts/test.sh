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
exec .venv/bin/python -m pytest "$@"
