#!/usr/bin/env bash
# Debian's slurm-wlm and munge, for tests/e2e/test_slurm.py: the test starts
# a real Slurm of two nodes on this machine (munged, slurmctld, a slurmd per
# node, each node in a network and UTS namespace of its own). Installs them
# with apt-get when missing (root); a no-op when they are there.
set -euo pipefail
missing=()
for tool in slurmctld slurmd sbatch munged mungekey; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "slurm_packages: need root to install slurm-wlm and munge" >&2; exit 1; }
echo "slurm_packages: installing slurm-wlm and munge with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt_log=$(mktemp)
{ apt-get update -qq && apt-get install -y -qq slurm-wlm munge; } > "$apt_log" 2>&1 </dev/null || {
  echo "slurm_packages: apt-get install slurm-wlm munge failed; the end of its output:" >&2
  tail -15 "$apt_log" >&2
  exit 1
}
rm -f "$apt_log"
