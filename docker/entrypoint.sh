#!/bin/sh
# The image's entry point: `python launch.py --workdir=$ACME_LAUNCH_WORKDIR ARGS`.
# Run directories go to the /runs volume unless ARGS name another --workdir
# (absl keeps the last value given). Everything else is launch.py's.
set -eu

workdir=${ACME_LAUNCH_WORKDIR:-/runs}

# `docker run --user UID:GID` with a uid the image does not know leaves HOME
# at / (not writable); the libraries want a writable HOME for their caches.
if [ -z "${HOME:-}" ] || [ "$HOME" = / ] || ! [ -w "$HOME" ]; then
  export HOME="/tmp/home-$(id -u)"
  mkdir -p "$HOME"
fi

uses_default_workdir=yes
for arg in "$@"; do
  case $arg in
    --workdir|--workdir=*) uses_default_workdir=no ;;
  esac
done
if [ "$uses_default_workdir" = yes ] && [ -d "$workdir" ] && ! [ -w "$workdir" ]; then
  echo "acme-launch (container): $workdir is not writable by uid $(id -u)." \
    "Give the run folder to that uid, or run as yourself:" \
    "mkdir -p runs && docker run --user \"\$(id -u):\$(id -g)\" -v \"\$PWD/runs:/runs\" ..." >&2
fi

exec python /app/launch.py --workdir="$workdir" "$@"
