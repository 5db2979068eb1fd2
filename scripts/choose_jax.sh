#!/usr/bin/env bash
# Prints which JAX build scripts/setup.sh installs, and why, as one line:
#   <cpu|cuda12><TAB><reason>
# cuda12 (JAX's CUDA 12 plugin and NVIDIA's CUDA wheels, the pins in
# docker/requirements-cuda12.txt) when `nvidia-smi -L` lists a GPU, cpu
# otherwise; ACME_LAUNCH_JAX=cpu|cuda12 overrides. Any other value: one line
# on stderr, exit 2.
set -u

case "${ACME_LAUNCH_JAX:-}" in
  cpu|cuda12)
    printf '%s\tACME_LAUNCH_JAX=%s\n' "$ACME_LAUNCH_JAX" "$ACME_LAUNCH_JAX"
    exit 0 ;;
  '') ;;
  *)
    echo "acme-launch: error: ACME_LAUNCH_JAX must be cpu or cuda12, not '$ACME_LAUNCH_JAX'" >&2
    exit 2 ;;
esac

if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if [ "${gpus:-0}" -gt 0 ]; then
    printf 'cuda12\tnvidia-smi lists %s NVIDIA GPU(s); ACME_LAUNCH_JAX=cpu to skip the CUDA build\n' "$gpus"
    exit 0
  fi
  printf 'cpu\tnvidia-smi lists no GPU\n'
  exit 0
fi
printf 'cpu\tno NVIDIA GPU (no nvidia-smi on PATH); ACME_LAUNCH_JAX=cuda12 to install the CUDA build anyway\n'
