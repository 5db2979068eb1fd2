#!/usr/bin/env bash
# Creates .venv with CPython 3.10 and installs the locked requirements.
# Skips the install when the lock files are unchanged since the last success,
# so a second run takes about a second. With --dev, also the linters of
# requirements-dev.txt (scripts/test.sh), under a stamp of their own.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ACME_LAUNCH_VENV:-.venv}
STAMP="$VENV/.acme-launch-lock.sha256"
DEV_STAMP="$VENV/.acme-launch-dev.sha256"
dev=0
[ "${1:-}" = --dev ] && dev=1

# requirements-dev.txt into $VENV, unless its stamp says it is there.
install_dev() {
  [ "$dev" = 1 ] || return 0
  local hash
  hash=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
  [ -f "$DEV_STAMP" ] && [ "$(cat "$DEV_STAMP")" = "$hash" ] && return 0
  echo "acme-launch: installing the linters (requirements-dev.txt) into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r requirements-dev.txt -c requirements.txt
  echo "$hash" > "$DEV_STAMP"
}

# This checkout, installed editable (the package only, no dependencies): the
# scripts outside the package, `python bench/x.py` and
# scripts/results_tables.py, then import acme_launch from here. Skipped when
# $VENV imports this checkout's package already; a warning if pip cannot
# (launch.py and the tests do not need it).
install_checkout() {
  local python here
  python="$(cd "$VENV" && pwd)/bin/python"
  here=$(pwd)
  (cd / && "$python" -c 'import os, sys, acme_launch
sys.exit(os.path.realpath(acme_launch.ROOT) != os.path.realpath(sys.argv[1]))' \
    "$here") >/dev/null 2>&1 && return 0
  echo "acme-launch: installing this checkout into $VENV (editable)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation -e . \
    || echo "acme-launch: warning: this checkout is not installed in $VENV;" \
      "bench/ scripts need PYTHONPATH=$(pwd)" >&2
}

# A venv installed from an offline bundle (scripts/install_bundle.sh) has no
# package index to install from: it is kept as it is.
if [ -f "$VENV/.acme-launch-bundle" ]; then
  echo "acme-launch: $VENV came from an offline bundle" \
    "($(cat "$VENV/.acme-launch-bundle")); nothing to install" >&2
  "$VENV/bin/python" acme_launch/run/loopback.py
  install_checkout
  exit 0
fi

# Which JAX build: CUDA 12 where an NVIDIA GPU is, CPU elsewhere
# (scripts/choose_jax.sh; ACME_LAUNCH_JAX=cpu|cuda12 overrides).
choice=$(scripts/choose_jax.sh) || exit $?
jax_build=${choice%%$'\t'*}
echo "acme-launch: JAX build: $jax_build (${choice#*$'\t'})" >&2
cuda_lock=/dev/null
[ "$jax_build" = cuda12 ] && cuda_lock=docker/requirements-cuda12.txt
lock_hash=$( (cat requirements.txt requirements-nodeps.txt "$cuda_lock"; echo "jax=$jax_build") \
  | sha256sum | cut -d' ' -f1)

# The loopback shim (acme_launch/run/loopback.py): an LD_PRELOAD library, built
# with the system C compiler into $VENV/lib when missing or its source changed.
# Without a compiler this warns; local runs are then refused unless given
# --allow_exposed_listeners.
build_loopback_shim() {
  "$VENV/bin/python" acme_launch/run/loopback.py
}

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$lock_hash" ]; then
  build_loopback_shim
  install_checkout
  install_dev
  exit 0
fi

if [ ! -x "$VENV/bin/python" ] || \
   ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then
  python=$(scripts/find_python310.sh)
  echo "acme-launch: creating $VENV with $python" >&2
  rm -rf "$VENV"
  "$python" -m venv "$VENV"
fi

echo "acme-launch: installing the locked requirements into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-nodeps.txt
if [ "$jax_build" = cuda12 ]; then
  # Pinned as in the Docker image; requirements.txt as constraints, so
  # nothing else moves.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r docker/requirements-cuda12.txt -c requirements.txt
else
  # A switch back from cuda12: the CPU jaxlib alone.
  "$VENV/bin/python" -m pip uninstall --quiet --yes jax-cuda12-plugin \
    jax-cuda12-pjrt >/dev/null 2>&1 || true
fi
echo "$lock_hash" > "$STAMP"
rm -f "$DEV_STAMP"  # A new venv, or packages the linters' pins may have moved.
build_loopback_shim
install_checkout
install_dev
