#!/usr/bin/env bash
# Off-screen OpenGL (Mesa's EGL, software rendering) for the video tests
# (tests/use/test_video.py: MuJoCo and dm_control frames; `evaluate --video`).
# Installs Debian's libegl1 and libegl-mesa0 with apt-get when EGL does not
# load (root); a no-op when it does.
set -euo pipefail
python3 -c 'import ctypes; ctypes.CDLL("libEGL.so.1"); ctypes.CDLL("libEGL_mesa.so.0")' \
  2>/dev/null && exit 0
[ "$(id -u)" = 0 ] || { echo "gl_packages: need root to install libegl1 and libegl-mesa0" >&2; exit 1; }
echo "gl_packages: installing libegl1 and libegl-mesa0 with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt_log=$(mktemp)
{ apt-get update -qq && apt-get install -y -qq libegl1 libegl-mesa0; } > "$apt_log" 2>&1 </dev/null || {
  echo "gl_packages: apt-get install libegl1 libegl-mesa0 failed; the end of its output:" >&2
  tail -15 "$apt_log" >&2
  exit 1
}
rm -f "$apt_log"
