#!/usr/bin/env bash
# CI check of docker/Dockerfile without a Docker engine: builds the image with
# podman on a Debian base that holds this machine's CPython 3.10, runs the smoke
# training run in a container, and checks what it left on the mounted volume.
#
#   .ci/docker_check.sh          (as root; installs podman, runc, debootstrap)
#
# Everything it can keep is kept between runs under $ACME_DOCKER_CHECK_CACHE
# (default /var/cache/acme-launch-docker-check): podman's storage (overlay
# driver, its own root), so unchanged image layers are reused, and the base
# image, rebuilt only when its inputs change. Set ACME_DOCKER_CHECK_FRESH=1 to
# start from an empty cache. Non-interactive; exits non-zero with a message on
# the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${ACME_DOCKER_CHECK_CACHE:-/var/cache/acme-launch-docker-check}
IMAGE=localhost/acme-launch:ci-check
BASE_REPO=localhost/acme-launch-ci-base
RUN_NAME=docker_smoke
RUN_TIMEOUT_S=${ACME_DOCKER_CHECK_RUN_TIMEOUT:-900}
# Libraries that a CPython built on Debian bookworm links and minbase lacks
# (checked below with ldd inside the base, so a missing one fails here, not in
# the build). Not for _tkinter and nis, which nothing here imports.
BASE_PACKAGES=libssl3,libffi8,libsqlite3-0,libreadline8,libncursesw6,libexpat1,libbz2-1.0
BASE_RECIPE_VERSION=2   # bump when the base recipe below changes

t0=$(date +%s)
say() { printf '[docker_check %4ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
fail() { printf 'docker_check: FAILED: %s\n' "$*" >&2; exit 1; }
verified=()
ok() { verified+=("$*"); say "ok: $*"; }

# --- 1. Tools ------------------------------------------------------------------
missing=()
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "need ${missing[*]} and root to install them (apt-get)"
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } > "$apt_log" 2>&1 </dev/null \
    || fail "apt-get install ${missing[*]} failed; the end of its output:
$(tail -15 "$apt_log")"
  rm -f "$apt_log"
fi
[ "$(id -u)" = 0 ] || fail "run as root (debootstrap and podman's storage need it)"

# --- 2. podman's own storage, kept between runs --------------------------------
if [ "${ACME_DOCKER_CHECK_FRESH:-0}" = 1 ] && [ -d "$CACHE" ]; then
  say "ACME_DOCKER_CHECK_FRESH=1: removing the cache $CACHE"
  CONTAINERS_STORAGE_CONF="$CACHE/storage.conf" podman system reset --force \
    >/dev/null 2>&1 || true
  rm -rf "$CACHE"
fi
mkdir -p "$CACHE/storage" "$CACHE/runroot" "$CACHE/tmp"
cat > "$CACHE/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$CACHE/storage"
runroot = "$CACHE/runroot"
EOF
cat > "$CACHE/containers.conf" <<EOF
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
export CONTAINERS_STORAGE_CONF="$CACHE/storage.conf"
export CONTAINERS_CONF="$CACHE/containers.conf"
export TMPDIR="$CACHE/tmp"
if ! podman info >/dev/null 2>&1; then
  # A run killed half-way can leave the storage unusable: start it afresh.
  say "podman cannot open its storage under $CACHE; resetting it"
  podman system reset --force >/dev/null 2>&1 || true
  rm -rf "$CACHE/storage" "$CACHE/runroot"
  mkdir -p "$CACHE/storage" "$CACHE/runroot"
  podman info >/dev/null 2>&1 \
    || fail "podman cannot open its storage: $(podman info 2>&1 | tail -3)"
fi
[ "$(podman info --format '{{.Store.GraphDriverName}}')" = overlay ] \
  || fail "podman is not using the overlay storage driver"

# --- 3. The base image: Debian minbase + this machine's CPython 3.10 + its CAs -
python=$(scripts/find_python310.sh) || fail "no CPython 3.10 on this machine (scripts/find_python310.sh)"
prefix=$("$python" -c 'import sys; print(sys.base_prefix)')
pyversion=$("$python" -c 'import platform; print(platform.python_version())')
[ -x "$prefix/bin/python3.10" ] || fail "no bin/python3.10 under $prefix"
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca_bundle" ] || fail "no CA bundle at $ca_bundle"
base_key=$( {
  echo "recipe $BASE_RECIPE_VERSION bookworm minbase $BASE_PACKAGES"
  echo "python $pyversion $prefix"
  sha256sum "$prefix/bin/python3.10" "$prefix"/lib/libpython3.10.so* 2>/dev/null
  cat "$ca_bundle"
  cat /usr/local/share/ca-certificates/* 2>/dev/null || true
} | sha256sum | cut -c1-16)
BASE_IMAGE="$BASE_REPO:$base_key"

if podman image exists "$BASE_IMAGE"; then
  say "reusing base image $BASE_IMAGE (inputs unchanged)"
else
  say "making base image $BASE_IMAGE: debootstrap bookworm + CPython $pyversion from $prefix"
  rootfs="$CACHE/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$rootfs" \
    > "$CACHE/debootstrap.log" 2>&1 \
    || fail "debootstrap failed; the end of $CACHE/debootstrap.log:
$(tail -15 "$CACHE/debootstrap.log")"
  # The interpreter, without its site-packages (the image makes its own venv;
  # this machine's holds local settings), its tests and static library.
  mkdir -p "$rootfs/opt/python3.10"
  tar -C "$prefix" -cf - \
      --exclude=./lib/python3.10/site-packages --exclude=./lib/python3.10/test \
      --exclude='*.a' --exclude=__pycache__ . \
    | tar -C "$rootfs/opt/python3.10" -xf -
  mkdir -p "$rootfs/opt/python3.10/lib/python3.10/site-packages"
  echo /opt/python3.10/lib > "$rootfs/etc/ld.so.conf.d/python3.10.conf"
  for name in python3.10 python3; do
    ln -sf /opt/python3.10/bin/python3.10 "$rootfs/usr/local/bin/$name"
  done
  chroot "$rootfs" /sbin/ldconfig
  # This machine's trust store (HTTPS goes through an intercepting CA here).
  mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/usr/local/share/ca-certificates"
  cp "$ca_bundle" "$rootfs/etc/ssl/certs/ca-certificates.crt"
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/" 2>/dev/null || true
  # Every extension module the venv may load must find its libraries.
  unresolved=$(chroot "$rootfs" /bin/sh -c '
    for f in /opt/python3.10/bin/python3.10 /opt/python3.10/lib/python3.10/lib-dynload/*.so; do
      case $f in *_tkinter*|*/nis.*) continue ;; esac
      ldd "$f" 2>&1 | grep "not found" | sed "s|^|$f: |"
    done')
  [ -z "$unresolved" ] || fail "the base lacks libraries (add their packages to BASE_PACKAGES):
$unresolved"
  chroot "$rootfs" /usr/local/bin/python3.10 -c \
      'import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid, hashlib, venv, ensurepip' \
    || fail "CPython 3.10 does not run inside the base rootfs"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf - . | podman import --quiet - "$BASE_IMAGE" >/dev/null \
    || fail "podman import of the base rootfs failed"
  rm -rf "$rootfs"
  # Older bases (other inputs) only take space.
  podman images --format '{{.Repository}}:{{.Tag}}' | grep "^$BASE_REPO:" \
    | grep -v ":$base_key\$" | xargs -r podman rmi --force >/dev/null 2>&1 || true
fi
ok "base image $BASE_IMAGE: Debian bookworm minbase with CPython $pyversion, no python3.10 from apt"

# --- 4. Build docker/Dockerfile ------------------------------------------------
say "podman build (JAX_CUDA=none): first time several minutes, then cached layers"
build_log="$CACHE/build.log"
build_start=$(date +%s)
if ! podman build --isolation=chroot --layers \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg JAX_CUDA=none \
    -f docker/Dockerfile -t "$IMAGE" . > "$build_log" 2>&1 </dev/null; then
  fail "podman build failed; the end of $build_log:
$(tail -30 "$build_log")"
fi
grep -E '^acme-launch image:' "$build_log" | sed 's/^/    /' || true
podman image prune --force >/dev/null 2>&1 || true   # earlier builds' leftovers
ok "podman build of docker/Dockerfile in $(( $(date +%s) - build_start )) s ($(grep -c -- '--> Using cache' "$build_log" || true) steps from cache)"

user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
entrypoint=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$IMAGE")
cmd=$(podman image inspect --format '{{json .Config.Cmd}}' "$IMAGE")
uid=${user%%:*}
case $uid in ''|0|root|*[!0-9]*) fail "image user is '$user', expected a numeric non-root uid" ;; esac
[ "$cmd" = '["--config=ppo_mujoco"]' ] || fail "image CMD is $cmd, expected [\"--config=ppo_mujoco\"]"
case $entrypoint in *entrypoint.sh*) ;; *) fail "image ENTRYPOINT is $entrypoint" ;; esac
ok "image runs as uid $user, ENTRYPOINT $entrypoint, CMD $cmd"

# --- 5. The smoke run in a container, run directory on a host volume ----------
runs="$CACHE/runs"
rm -rf "$runs"
mkdir -p "$runs"
chown "$user" "$runs"
podman_run=(podman run --rm --runtime runc --network none
  --ulimit nofile=20000:20000 --ulimit nproc=32768:32768
  -v "$runs:/runs")
say "podman run $IMAGE --config=smoke --run_name=$RUN_NAME (default --workdir, /runs volume)"
run_start=$(date +%s)
run_log="$CACHE/run.log"
set +e
timeout "$RUN_TIMEOUT_S" "${podman_run[@]}" "$IMAGE" --config=smoke --run_name="$RUN_NAME" \
  > "$run_log" 2>&1 </dev/null
code=$?
set -e
[ "$code" = 0 ] || fail "the smoke run in the container exited $code; the end of its output:
$(tail -30 "$run_log")"
ok "smoke run in the container exited 0 in $(( $(date +%s) - run_start )) s"

run_dir="$runs/$RUN_NAME"
[ -d "$run_dir" ] || fail "no run directory $run_dir on the host volume (is --workdir defaulting to /runs?)"
for path in summary.json config.json checkpoints logs metrics; do
  [ -e "$run_dir/$path" ] || fail "the run directory lacks $path: $(ls "$run_dir")"
done
python3 - "$run_dir/summary.json" <<'EOF' || fail "summary.json check failed"
import json, sys
summary = json.load(open(sys.argv[1]))
if summary.get('exit_reason') != 'budget_reached':
    sys.exit(f"exit_reason is {summary.get('exit_reason')!r}, not 'budget_reached'")
EOF
ok "the host volume holds $RUN_NAME/{summary.json,config.json,checkpoints,logs,metrics}; exit_reason budget_reached"

owners=$(find "$run_dir" -printf '%u\n' | sort -u | tr '\n' ' ')
[ "$owners" = "$uid " ] || [ "$owners" = "$(getent passwd "$uid" | cut -d: -f1) " ] \
  || fail "files in the run directory belong to '$owners', expected only uid $uid"
gid=${user#*:}; [ "$gid" != "$user" ] || gid=$uid
# The run directory is private to its owner (mode 700): read it all back as
# the host user with the container's uid, as `docker run --user $(id -u)` gives.
setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    find "$run_dir" -type f -exec cat {} + > /dev/null \
  || fail "the host's uid $uid cannot read every file of the run directory"
ok "every file in the run directory belongs to the container's uid $uid, and the host's uid $uid reads them all ($(find "$run_dir" -type f | wc -l) files)"

# --- 6. Resume: the same --run_name on the same volume, a larger budget -------
# The first run may overshoot its budget (actors finish their episodes), so the
# new budget is set above the steps it actually took.
budget=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["actor_steps"] + 2000)' \
  "$run_dir/summary.json") || fail "summary.json has no actor_steps"
say "podman run ... --run_name=$RUN_NAME --config.max_actor_steps=$budget (resume from the volume)"
resume_start=$(date +%s)
set +e
timeout "$RUN_TIMEOUT_S" "${podman_run[@]}" "$IMAGE" --config=smoke --run_name="$RUN_NAME" \
  --config.max_actor_steps="$budget" > "$CACHE/resume.log" 2>&1 </dev/null
code=$?
set -e
[ "$code" = 0 ] || fail "the resumed run exited $code; the end of its output:
$(tail -30 "$CACHE/resume.log")"
restored=$(python3 - "$run_dir/summary.json" "$budget" <<'EOF'
import json, sys
summary = json.load(open(sys.argv[1]))
if summary.get('exit_reason') != 'budget_reached' or summary.get('max_actor_steps') != int(sys.argv[2]):
    sys.exit(f"summary after resume: exit_reason {summary.get('exit_reason')!r}, "
             f"max_actor_steps {summary.get('max_actor_steps')!r}")
if not summary.get('restored_actor_steps', 0) >= 6000:
    sys.exit(f"restored_actor_steps is {summary.get('restored_actor_steps')!r}, expected >= 6000")
print(summary['restored_actor_steps'])
EOF
) || fail "the resumed run did not restore from the volume (see above)"
ok "re-running --run_name=$RUN_NAME resumed from $restored actor steps on the volume and reached the raised budget ($(( $(date +%s) - resume_start )) s)"

# --- 7. A dry run of the default config ----------------------------------------
"${podman_run[@]}" "$IMAGE" --config=ppo_mujoco --dry_run > "$CACHE/dry_run.log" 2>&1 </dev/null \
  || fail "--dry_run of ppo_mujoco failed: $(tail -5 "$CACHE/dry_run.log")"
grep -q 'dry run: nothing was started' "$CACHE/dry_run.log" \
  || fail "--dry_run printed no plan: $(tail -5 "$CACHE/dry_run.log")"
ok "--config=ppo_mujoco --dry_run prints the node placement in the container"

rm -rf "$runs"
say "docker check passed in $(( $(date +%s) - t0 )) s. Verified:"
printf '  - %s\n' "${verified[@]}"
