#!/usr/bin/env bash
# Packs a self-contained archive for hosts without network: the CPython 3.10
# that the venv was made from (the whole prefix, less tests, IDLE and
# tkinter), the venv with the locked packages (CPU or CUDA build, whichever
# it holds) and the project's files (git's tracked and untracked, not
# ignored), as one tar stream, xz-compressed and split into parts of a chosen
# size, with MANIFEST.sha256 (one sha256 per part), BUNDLE.json (what it
# holds, which the installer checks the host against before it unpacks) and
# install_bundle.sh next to them. On the target:
#
#   bash OUT/install_bundle.sh DEST     # checks every part, then installs
#
#   scripts/bundle.sh [--venv=.venv] [--part_size=60M] [--xz_level=9]
#       [--slim] [--cuda=none|minimal] [--cuda_from_host=cudnn] OUT
#
# --part_size: split(1) sizes (K, M, G are powers of 1024). --xz_level: 0-9
# (9, the default, is the smallest and slowest; 0 packed the 2.7 GB CPU venv
# to 878 MB in 265 s on a loaded 2-core machine) or `none` (a plain tar).
# --slim packs a copy of the venv without what a run on one host does not
# use: Ray (and Ray Tune's pyarrow, tensorboardX: sweeps run on Tune), W&B,
# MLflow, OpenCV (the gym Atari backend), TF's C headers,
# EnvPool's VizDoom and Procgen, and TensorFlow's CUDA build (tensorflow-cpu
# of the same version in its place: TF never takes a GPU here).
# --cuda=minimal adds to a copy of a CPU venv only what an NVIDIA host with
# no CUDA 12 libraries lacks (docker/requirements-cuda12-minimal.txt, pruned)
# and turns JAX's start-up check of the libraries left out off;
# --cuda_from_host=cudnn leaves cuDNN out too (the host's libcudnn.so.9).
# Both download from the package index while packing, never on the target.
# For the full CUDA build on a machine without a GPU:
#   ACME_LAUNCH_JAX=cuda12 ACME_LAUNCH_VENV=.venv-cuda12 scripts/setup.sh
#   scripts/bundle.sh --venv=.venv-cuda12 OUT
# The interpreter must be self-contained (pyenv's, uv's): a system Python
# under /usr cannot be carried over. See README "GPU hosts".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

fail() { echo "acme-launch: error: $*" >&2; exit 2; }

venv=${ACME_LAUNCH_VENV:-.venv}
part_size=60M
xz_level=9
slim=
cuda=none
from_host=
out=
for arg in "$@"; do
  case "$arg" in
    --venv=*) venv=${arg#*=} ;;
    --part_size=*) part_size=${arg#*=} ;;
    --xz_level=*) xz_level=${arg#*=} ;;
    --slim) slim=1 ;;
    --cuda=*) cuda=${arg#*=} ;;
    --cuda_from_host=*) from_host=${arg#*=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) fail "unknown option $arg (see scripts/bundle.sh --help)" ;;
    *) [ -z "$out" ] || fail "one output directory, not '$out' and '$arg'"
       out=$arg ;;
  esac
done
[ -n "$out" ] || fail "usage: scripts/bundle.sh [--venv=PATH] [--part_size=60M] [--xz_level=0-9|none] OUT"
[[ "$part_size" =~ ^[1-9][0-9]*[KMG]?$ ]] || \
  fail "--part_size must be a number with an optional K, M or G suffix, not '$part_size'"
[[ "$xz_level" =~ ^([0-9]|none)$ ]] || fail "--xz_level must be 0-9 or none, not '$xz_level'"
case "$cuda" in none|minimal) ;; *) fail "--cuda must be none or minimal, not '$cuda'" ;; esac
case "$from_host" in
  '') ;;
  cudnn) [ "$cuda" = minimal ] || fail "--cuda_from_host=cudnn goes with --cuda=minimal" ;;
  *) fail "--cuda_from_host takes cudnn (the one library a host may lend), not '$from_host'" ;;
esac
[ "$xz_level" = none ] || command -v xz >/dev/null || fail "xz is not installed (or pass --xz_level=none)"
case "$venv" in /*) ;; *) venv="$root/$venv" ;; esac
[ -x "$venv/bin/python" ] || fail "no venv at $venv: run scripts/setup.sh first"
[ ! -e "$out" ] || fail "$out already exists: choose a new directory"
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

# What the venv is made of, in the venv's own words.
info=$("$venv/bin/python" - <<'EOF'
import importlib.util, sys
build = 'cuda12' if importlib.util.find_spec('jax_cuda12_plugin') else 'cpu'
print(sys.prefix, sys.base_prefix, '.'.join(map(str, sys.version_info[:3])), build,
      sep='\n')
EOF
) || info=
{ read -r venv_prefix; read -r base_prefix; read -r version; read -r jax_build; } \
  <<< "$info" || true
case "${version:-}" in 3.10.*) ;; *) fail "the venv's Python ($venv/bin/python) is not a working CPython 3.10" ;; esac
case "$base_prefix" in
  /|/usr|/usr/local)
    fail "the venv's interpreter is a system Python ($base_prefix): make the venv with a self-contained CPython 3.10 (pyenv's or uv's; ACME_LAUNCH_PYTHON=PATH scripts/setup.sh)" ;;
esac
[ -f "$base_prefix/lib/python3.10/os.py" ] || fail "no standard library under $base_prefix/lib/python3.10"
[ "$cuda" = none ] || [ "$jax_build" = cpu ] || \
  fail "--cuda=$cuda adds to a CPU venv; $venv already holds JAX's CUDA build"

work=$(mktemp -d "$out.partial.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage="$work/.stage"
mkdir -p "$stage/python"

# 1. The interpreter, stripped, its RUNPATHs made relative (scripts/relocate.py).
tar -C "$base_prefix" -cf - --anchored --wildcards \
  --exclude=./lib/python3.10/test --exclude=./lib/python3.10/idlelib \
  --exclude=./lib/python3.10/tkinter --exclude=./lib/python3.10/turtledemo \
  --exclude=./lib/python3.10/lib2to3/tests --exclude=./lib/python3.10/distutils/tests \
  --exclude=./lib/python3.10/ctypes/test --exclude=./lib/python3.10/sqlite3/test \
  --exclude=./lib/python3.10/unittest/test --exclude='./lib/python3.10/lib-dynload/_tkinter*' \
  --exclude='./lib/python3.10/config-3.10-*/libpython3.10*.a' --exclude='./bin/idle*' \
  --exclude='./lib/libtcl*' --exclude='./lib/libtk*' --exclude='./lib/tcl8*' --exclude='./lib/tk8*' \
  . | tar -C "$stage/python" -xf -
"$venv/bin/python" "$root/scripts/relocate.py" runpath "$stage/python" "$base_prefix"

# 1a. The loopback shim (a node's listeners kept local and screened) built
# from this checkout's source into the venv, so that no stale copy travels.
(cd "$root" && "$venv/bin/python" acme_launch/run/loopback.py) \
  || fail "could not build the loopback shim (acme_launch/run/loopback.py) into $venv"

# 1b. --slim, --cuda: a copy of the venv, changed; the original stays as it is.
if [ -n "$slim" ] || [ "$cuda" != none ]; then
  cp -a "$venv" "$work/venv"
  venv=$work/venv
  pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
  site=$venv/lib/python3.10/site-packages
  if [ -n "$slim" ]; then
    tf_version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("tensorflow"))' 2>/dev/null || true)
    "${pip[@]}" uninstall --yes ray pyarrow tensorboardX wandb mlflow-skinny opencv-python-headless tensorflow 2>/dev/null || true
    if [ -n "$tf_version" ]; then
      "${pip[@]}" install --no-deps "tensorflow-cpu==$tf_version" \
        || fail "could not fetch tensorflow-cpu==$tf_version from the package index"
    fi
    rm -rf "$site/tensorflow/include" "$site/envpool/procgen" "$site/envpool/vizdoom"
  fi
  if [ "$cuda" = minimal ]; then
    wanted=$(grep -v '^#' "$root/docker/requirements-cuda12-minimal.txt")
    [ "$from_host" = cudnn ] && wanted=$(printf '%s\n' "$wanted" | grep -v '^nvidia-cudnn')
    # shellcheck disable=SC2086
    "${pip[@]}" install --no-deps $wanted \
      || fail "could not fetch the CUDA wheels of docker/requirements-cuda12-minimal.txt"
    rm -rf "$site/nvidia/cudnn/lib/libcudnn_adv.so.9" "$site"/nvidia/*/include \
      "$site/nvidia/cublas/lib/libnvblas.so.12"
    find "$site/nvidia/cuda_nvcc" -mindepth 1 -maxdepth 1 ! -name bin ! -name nvvm -exec rm -rf {} +
    find "$site/nvidia/cuda_nvcc/bin" -mindepth 1 ! -name ptxas -exec rm -rf {} +
    find "$site/nvidia/cuda_nvcc/nvvm" -mindepth 1 -maxdepth 1 ! -name libdevice -exec rm -rf {} +
    # JAX asks at start-up for cuFFT, cuSOLVER, cuSPARSE and cuPTI too; the
    # bundle leaves them out, so every process of this venv skips that check.
    echo "import os; os.environ.setdefault('JAX_SKIP_CUDA_CONSTRAINTS_CHECK', '1')" \
      > "$site/acme_launch_cuda_minimal.pth"
    jax_build=cuda12-minimal
  fi
  # Scripts pip wrote name the copy; the installer rewrites the original's path.
  grep -rlI -- "$venv" "$venv/bin" | while IFS= read -r f; do
    sed -i "s|$venv|$venv_prefix|g" "$f"; done
fi

commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
"$venv/bin/python" - "$stage/bundle.json" "$base_prefix" "$venv_prefix" "$version" \
  "$jax_build" "$commit" "$from_host" <<'EOF'
import json, sys, time
path, prefix, venv, version, jax_build, commit, from_host = sys.argv[1:]
with open(path, 'w') as f:
  json.dump({'python_prefix': prefix, 'venv': venv, 'python_version': version,
             'jax_build': jax_build, 'from_host': from_host.split(',') if from_host else [],
             'project_commit': commit,
             'created': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())},
            f, indent=2)
EOF

# 2. The project's files: git's tracked and untracked-but-not-ignored ones
# (a checkout without git: all but venvs, runs and caches).
files="$work/.files"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
     [ -e "$f" ] && printf './%s\0' "$f"; done) > "$files"
else
  (cd "$root" && find . \( -name '.venv*' -o -name runs -o -name .git -o -name __pycache__ \
     -o -path ./bench/out \) -prune -o -type f -print0) > "$files"
fi

# 3. One tar stream: bundle.json, python/, acme-launch/ (with .venv), split.
name=acme-launch-bundle.tar
compress=(cat)
if [ "$xz_level" != none ]; then name=$name.xz; compress=(xz -T0 "-$xz_level" -c); fi
venv_real=$(cd "$venv" && pwd -P)
venv_rel=${venv_real#/}
venv_pattern=$(printf '%s' "$venv_rel" | sed 's/[][\.*^$|]/\\&/g')
echo "acme-launch: packing Python $version ($base_prefix), the $jax_build venv" \
  "($venv_real) and the project into $out ($name, parts of $part_size)" >&2
tar -cf - --owner=0 --group=0 \
  -C "$stage" bundle.json python \
  -C / --transform="s|^$venv_pattern|acme-launch/.venv|S" "$venv_rel" \
  -C "$root" --transform='s|^\./|acme-launch/|S' --null -T "$files" \
  | "${compress[@]}" | split -b "$part_size" -d -a 3 - "$work/$name."
cp "$stage/bundle.json" "$work/BUNDLE.json"
rm -rf "$stage" "$files"

rm -rf "$work/venv"  # The --slim / --cuda copy, packed.
(cd "$work" && sha256sum "$name".* > MANIFEST.sha256)
cp "$root/scripts/install_bundle.sh" "$work/install_bundle.sh"
chmod 755 "$work"
parts=$(wc -l < "$work/MANIFEST.sha256")
size=$(du -sh "$work" | cut -f1)
mv "$work" "$out"
trap - EXIT
echo "acme-launch: $out: $parts part(s), $size; on the target:" \
  "bash $(basename "$out")/install_bundle.sh DEST" >&2
