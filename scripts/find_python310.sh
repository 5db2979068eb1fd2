#!/usr/bin/env bash
# Prints the path of a working CPython 3.10 interpreter, or explains what to
# install and exits 1. TF 2.8 and Launchpad 0.5 ship wheels for 3.10 only.
set -u

is_py310() {
  local candidate="$1"
  [ -n "$candidate" ] && [ -x "$candidate" ] || return 1
  "$candidate" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 10) or sys.implementation.name != "cpython")' \
    >/dev/null 2>&1
}

candidates=()
[ -n "${ACME_LAUNCH_PYTHON:-}" ] && candidates+=("$ACME_LAUNCH_PYTHON")
# 1. On PATH (a pyenv shim may exist yet refuse to run: is_py310 checks that).
for name in python3.10 python3 python; do
  path=$(command -v "$name" 2>/dev/null) && candidates+=("$path")
done
# 2. pyenv's installed versions, whether or not one is selected.
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  for dir in "$root"/versions/3.10*; do
    [ -d "$dir" ] && candidates+=("$dir/bin/python3.10")
  done
fi
# 3. uv-managed interpreters.
if command -v uv >/dev/null 2>&1; then
  path=$(uv python find 3.10 2>/dev/null) && candidates+=("$path")
fi
# 4. Common system locations.
candidates+=(/usr/bin/python3.10 /usr/local/bin/python3.10)

for candidate in "${candidates[@]}"; do
  if is_py310 "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

echo "error: no working CPython 3.10 found (tried PATH, pyenv, uv)." >&2
echo "Install one, e.g. 'pyenv install 3.10', 'uv python install 3.10' or 'apt install python3.10 python3.10-venv'," >&2
echo "or point ACME_LAUNCH_PYTHON at it." >&2
exit 1
