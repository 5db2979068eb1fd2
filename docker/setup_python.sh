#!/bin/sh
# Image build step: finds a CPython 3.10 with venv in the base image (or
# installs one with apt where the base lacks it and apt has it, as on Ubuntu
# 22.04), creates the virtual environment VENV with it, and adds the
# non-root user that runs the launcher.
#
# Usage (as root, inside the build): setup_python.sh VENV UID GID
# PYTHON in the environment may name the interpreter to use.
set -eu

venv=$1
app_uid=$2
app_gid=$3

say() { echo "acme-launch image: $*" >&2; }

# Prints the path of a usable CPython 3.10 (venv and ensurepip importable).
find_python() {
  for candidate in ${PYTHON:-} python3.10 /usr/local/bin/python3.10 \
      /usr/bin/python3.10 /opt/python3.10/bin/python3.10 python3; do
    path=$(command -v "$candidate" 2>/dev/null) || continue
    if "$path" -c 'import sys, venv, ensurepip
sys.exit(sys.version_info[:2] != (3, 10) or sys.implementation.name != "cpython")' \
        >/dev/null 2>&1; then
      echo "$path"
      return 0
    fi
  done
  return 1
}

if python=$(find_python); then
  say "using the base image's Python: $python"
elif command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if apt-cache show python3.10-venv >/dev/null 2>&1; then
    say "installing python3.10 from the base image's apt sources"
    # libpython3.10: dm-reverb's extension links libpython3.10.so.1.0.
    apt-get install -y -qq --no-install-recommends \
      python3.10 python3.10-venv libpython3.10 ca-certificates >/dev/null
    rm -rf /var/lib/apt/lists/*
  else
    rm -rf /var/lib/apt/lists/*
    say "error: the base image has no CPython 3.10 and its apt sources have no python3.10-venv."
    say "Use a base with Python 3.10 (e.g. an Ubuntu 22.04 CUDA image) or one that already holds python3.10 on PATH."
    exit 1
  fi
  python=$(find_python) || {
    say "error: python3.10 was installed but does not work (venv/ensurepip missing?)"
    exit 1
  }
else
  say "error: the base image has no CPython 3.10 and no apt-get to install one."
  exit 1
fi

"$python" -m venv "$venv"
"$venv/bin/python" -c 'import sys; print("acme-launch image: venv Python", sys.version.split()[0])'

# The non-root user. Reuse an existing account with that uid (some bases,
# e.g. ubuntu:24.04, already have uid 1000).
if getent passwd "$app_uid" >/dev/null 2>&1; then
  say "reusing the base image's user $(getent passwd "$app_uid" | cut -d: -f1) (uid $app_uid)"
else
  getent group "$app_gid" >/dev/null 2>&1 || {
    if command -v groupadd >/dev/null 2>&1; then groupadd -g "$app_gid" acme
    else echo "acme:x:$app_gid:" >> /etc/group; fi
  }
  if command -v useradd >/dev/null 2>&1; then
    useradd -u "$app_uid" -g "$app_gid" -m -d /home/acme -s /bin/sh acme
  else
    echo "acme:x:$app_uid:$app_gid:acme-launch:/home/acme:/bin/sh" >> /etc/passwd
    mkdir -p /home/acme
    chown "$app_uid:$app_gid" /home/acme
  fi
fi
# The run volume belongs to that user, so a named volume starts writable.
mkdir -p /runs
chown "$app_uid:$app_gid" /runs
