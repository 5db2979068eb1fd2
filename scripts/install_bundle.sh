#!/usr/bin/env bash
# Installs a bundle made by scripts/bundle.sh, with no network:
#
#   bash install_bundle.sh [--parts=DIR] DEST
#
# DIR (default: this script's folder) holds the parts, MANIFEST.sha256 and
# BUNDLE.json; DEST must not exist yet. A CUDA bundle on a host without an
# NVIDIA driver for CUDA 12 (or, packed with --cuda_from_host=cudnn, without
# the host's libcudnn.so.9) is refused in one line, exit 2, first. Every part is checked against the manifest before
# anything is unpacked; a missing or corrupt part is named in one line, exit
# 2. The archive is unpacked into DEST.partial.* beside DEST, its venv is
# pointed at the new path (scripts/relocate.py, with the bundled Python), the
# main imports are tried there, and only then is it renamed to DEST: a failure
# leaves nothing behind. Afterwards:
#
#   cd DEST/acme-launch && .venv/bin/python launch.py --config=smoke
set -euo pipefail

fail() { echo "acme-launch: error: $*" >&2; exit 2; }

parts_dir=$(cd "$(dirname "$0")" && pwd)
dest=
for arg in "$@"; do
  case "$arg" in
    --parts=*) parts_dir=${arg#*=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) fail "unknown option $arg (see install_bundle.sh --help)" ;;
    *) [ -z "$dest" ] || fail "one destination, not '$dest' and '$arg'"; dest=$arg ;;
  esac
done
[ -n "$dest" ] || fail "usage: bash install_bundle.sh [--parts=DIR] DEST"
manifest="$parts_dir/MANIFEST.sha256"
[ -f "$manifest" ] || fail "no MANIFEST.sha256 in $parts_dir"
[ ! -e "$dest" ] || fail "$dest already exists: choose a new directory"
parent=$(dirname "$dest")
[ -d "$parent" ] && [ -w "$parent" ] || fail "$parent is not a writable directory"
dest=$(cd "$parent" && pwd)/$(basename "$dest")

# 0. What the bundle needs of this host (BUNDLE.json, beside the parts):
# JAX's CUDA 12 build needs an NVIDIA driver for CUDA 12 (525.60.13 or newer),
# and a bundle packed with --cuda_from_host=cudnn the host's libcudnn.so.9.
info=$(cat "$parts_dir/BUNDLE.json" 2>/dev/null || true)
build=$(printf '%s' "$info" | sed -n 's/.*"jax_build": *"\([^"]*\)".*/\1/p' | head -n 1 || true)
case "$build" in
  cuda12*)
    driver=$(sed -n 's/.*Kernel Module *\([0-9][0-9.]*\).*/\1/p' /proc/driver/nvidia/version 2>/dev/null | head -n 1 || true)
    [ -n "$driver" ] || driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
    [ -n "$driver" ] || fail "this bundle holds JAX's CUDA 12 build, and this host shows no NVIDIA driver (no /proc/driver/nvidia/version, no nvidia-smi): install the driver, or a CPU bundle"
    printf '525.60.13\n%s\n' "$driver" | sort -V -C \
      || fail "this bundle holds JAX's CUDA 12 build, which needs NVIDIA driver 525.60.13 or newer; this host has $driver"
    if printf '%s' "$info" | tr -d '\n' | grep -q '"from_host": *\[[^]]*"cudnn"'; then
      ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 ' \
        || fail "this bundle takes cuDNN from the host (packed with --cuda_from_host=cudnn), and this host has no libcudnn.so.9 (ldconfig -p)"
    fi ;;
esac

# 1. Every part present and intact, before anything is written.
names=()
while read -r sum name; do
  [ -n "$name" ] || continue
  [ -f "$parts_dir/$name" ] || fail "bundle part $name is missing from $parts_dir"
  actual=$(sha256sum < "$parts_dir/$name" | cut -d' ' -f1)
  [ "$actual" = "$sum" ] || fail "bundle part $name is corrupt (sha256 differs from MANIFEST.sha256)"
  names+=("$parts_dir/$name")
done < "$manifest"
[ "${#names[@]}" -gt 0 ] || fail "MANIFEST.sha256 in $parts_dir lists no parts"
decompress=(cat)
case "${names[0]}" in
  *.tar.xz.*) command -v xz >/dev/null || fail "xz is needed to unpack this bundle"
              decompress=(xz -dc -T0) ;;
esac

# 2. Unpack beside DEST, relocate, try the imports, rename.
stage=$(mktemp -d "$dest.partial.XXXXXX")
trap 'rm -rf "$stage"' EXIT
echo "acme-launch: ${#names[@]} part(s) verified; unpacking into $dest" >&2
cat "${names[@]}" | "${decompress[@]}" | tar -C "$stage" -xf - \
  || { echo "acme-launch: error: unpacking failed (disk full?); nothing installed" >&2; exit 1; }
python="$stage/python/bin/python3.10"
relocate="$stage/acme-launch/scripts/relocate.py"
"$python" "$relocate" install "$stage" "$stage"
if ! check=$(cd "$stage/acme-launch" && .venv/bin/python -c \
    'import acme_launch.compat, acme, jax, launchpad, reverb, tensorflow' 2>&1); then
  echo "acme-launch: error: the bundled Python cannot import the project here; nothing installed:" \
    "$(printf '%s\n' "$check" | tail -n 1)" >&2
  exit 1
fi
"$python" "$relocate" install "$stage" "$dest"
chmod 755 "$stage"
mv "$stage" "$dest"
trap - EXIT
echo "acme-launch: installed; run: cd $dest/acme-launch && .venv/bin/python launch.py --config=smoke" >&2
