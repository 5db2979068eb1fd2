#!/usr/bin/env bash
# Installs a bundle made by scripts/bundle.sh, with no network:
#
#   bash install_bundle.sh [--parts=DIR] DEST
#
# DIR (default: this script's folder) holds the parts and MANIFEST.sha256;
# DEST must not exist yet. Every part is checked against the manifest before
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
