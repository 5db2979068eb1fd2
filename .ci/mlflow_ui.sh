#!/usr/bin/env bash
# For tests/e2e/test_mlflow_ui.py: Debian's chromium (a real headless
# browser) and .venv-mlflow-ui, a venv holding the full mlflow package (its
# tracking server and UI) pinned by .ci/mlflow-ui-requirements.txt. Installs
# what is missing (chromium with apt-get, as root); a no-op when both are
# there. Without them the test skips.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || { echo "mlflow_ui: need root to install chromium" >&2; exit 1; }
  echo "mlflow_ui: installing chromium with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  { apt-get update -qq && apt-get install -y -qq chromium; } > "$apt_log" 2>&1 </dev/null || {
    echo "mlflow_ui: apt-get install chromium failed; the end of its output:" >&2
    tail -15 "$apt_log" >&2
    exit 1
  }
  rm -f "$apt_log"
fi

VENV=.venv-mlflow-ui
STAMP="$VENV/.lock.sha256"
lock_hash=$(sha256sum .ci/mlflow-ui-requirements.txt | cut -d' ' -f1)
if [ -x "$VENV/bin/mlflow" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$lock_hash" ]; then
  exit 0
fi
python=$(scripts/find_python310.sh)
echo "mlflow_ui: creating $VENV with the full mlflow package" >&2
rm -rf "$VENV"
"$python" -m venv "$VENV"
# (pip's warnings about index locations of this machine's pip.conf that
# do not exist are dropped; anything else it says is shown.)
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-deps -r .ci/mlflow-ui-requirements.txt 2>&1 \
  | { grep -v "^WARNING: Location '.*' is ignored" || true; } >&2
echo "$lock_hash" > "$STAMP"
