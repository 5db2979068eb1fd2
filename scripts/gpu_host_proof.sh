#!/usr/bin/env bash
# Installs a bundle on an air-gapped GPU host and measures, in order, what
# the GPU-host proof asks for, most important first, each step appending to OUT as it goes (a run
# cut off keeps what it measured):
#
#   bash scripts/gpu_host_proof.sh take PARTS         # moves .gpu/* into PARTS
#   bash scripts/gpu_host_proof.sh measure PARTS OUT [STEP...]
#
# `take` is for hosts whose files arrive one piece per command in .gpu/ (the
# next piece replaces it). `measure` installs the bundle in PARTS (made by
# `scripts/bundle.sh --slim --cuda=minimal`) into /opt/acme-launch once,
# then runs the STEPs (default: all, in this order):
#   facts     the host: GPU, driver, CUDA toolkit, its cuDNN, cores
#   jax       JAX on the GPU: devices, a convolution checked against the CPU
#             in float64, the cuDNN it loaded, a matrix product's rate
#   learners  bench/learner.py --alone_only for dqn_atari, r2d2_atari and
#             impala_atari with the learner on the GPU
#   main      launch.py --config=ppo_mujoco: its plan (--dry_run), then a
#             run of 300k steps; every node's record (devices, JAX memory limit)
#   inference bench/inference.py for r2d2_atari, 4 actors: per-actor against
#             central inference (the node on the GPU), and the node's step
#             alone at 1 to 32 rows
#   hostcudnn the jax step again with the host's libcudnn.so.9 in place of
#             the bundle's
#   cores     bench/throughput.py and bench/learner.py --config=sac_mujoco on
#             the host's cores
# Settings: PROOF_LEARNERS (the learners step's configs), PROOF_LEARNER_TIMEOUT
# (seconds each, 240), PROOF_MAIN_STEPS and PROOF_MAIN_SECONDS (the main
# step's budget, 300000, and limit, 150).
# OUT gets proof.log (everything printed), results.jsonl (one line a figure)
# and nodes.json. The code run is this checkout's (PYTHONPATH), the packages
# the bundle's.
set -uo pipefail

cmd=${1:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
case "$cmd" in
  take)
    parts=${2:?usage: gpu_host_proof.sh take PARTS}
    mkdir -p "$parts"
    mv "$repo"/.gpu/* "$parts"/ 2>/dev/null
    echo "parts in $parts: $(ls "$parts" | wc -l), $(du -sh "$parts" | cut -f1)"
    exit 0 ;;
  measure) ;;
  *) echo "usage: gpu_host_proof.sh take PARTS | measure PARTS OUT [STEP...]" >&2; exit 2 ;;
esac
parts=${2:?PARTS}
out=${3:?OUT}
shift 3
steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=(facts jax learners main inference hostcudnn cores)
mkdir -p "$out"
log=$out/proof.log
results=$out/results.jsonl
dest=/opt/acme-launch
py=$dest/acme-launch/.venv/bin/python
site=$dest/acme-launch/.venv/lib/python3.10/site-packages
export PYTHONPATH=$repo PYTHONUNBUFFERED=1
t0=$(date +%s)

say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$log"; }
record() { echo "$1" >> "$results"; }  # one JSON object

if [ ! -x "$py" ]; then
  say "install: $(ls "$parts" | wc -l) files in $parts"
  start=$(date +%s)
  if ! bash "$parts/install_bundle.sh" --parts="$parts" "$dest" >> "$log" 2>&1; then
    say "install failed"; tail -5 "$log"; exit 1
  fi
  record "{\"step\": \"install\", \"seconds\": $(( $(date +%s) - start ))}"
  say "installed in $(( $(date +%s) - start ))s"
fi
cd "$repo" || exit 1

jax_check() {  # $1: label
  "$py" - "$1" <<'EOF'
import ctypes, json, sys, time
import numpy as np
import jax, jax.numpy as jnp
label = sys.argv[1]
gpu = jax.devices()[0]
cpu = jax.devices('cpu')[0]
rng = np.random.default_rng(1)
x = rng.standard_normal((32, 4, 84, 84)).astype(np.float32)   # NCHW, Atari-sized
w = rng.standard_normal((32, 4, 8, 8)).astype(np.float32)
conv = lambda a, b: jax.lax.conv_general_dilated(a, b, (4, 4), 'VALID')
on_gpu = np.asarray(jax.jit(conv)(jax.device_put(x, gpu), jax.device_put(w, gpu)))
with jax.default_device(cpu):
  jax.config.update('jax_enable_x64', True)
  ref = np.asarray(jax.jit(conv)(x.astype(np.float64), w.astype(np.float64)))
  jax.config.update('jax_enable_x64', False)
error = float(np.linalg.norm(on_gpu - ref) / np.linalg.norm(ref))
loaded = sorted({line.split()[-1] for line in open('/proc/self/maps')
                 if 'libcudnn' in line or 'libcublas' in line or 'libcudart' in line})
try:
  cudnn = ctypes.CDLL('libcudnn.so.9')
  cudnn.cudnnGetVersion.restype = ctypes.c_size_t
  cudnn_version = cudnn.cudnnGetVersion()
except OSError as e:
  cudnn_version = str(e)
a = jax.device_put(rng.standard_normal((8192, 8192)).astype(np.float32), gpu)
mm = jax.jit(lambda m: m @ m)
mm(a).block_until_ready()
start = time.perf_counter()
for _ in range(10):
  r = mm(a)
r.block_until_ready()
tflops = 10 * 2 * 8192 ** 3 / (time.perf_counter() - start) / 1e12
print(json.dumps({'step': 'jax', 'label': label, 'jax': jax.__version__,
                  'devices': [str(d) for d in jax.devices()],
                  'device_kind': gpu.device_kind, 'platform': gpu.platform,
                  'conv_rel_error_vs_f64': error, 'nan': bool(np.isnan(on_gpu).any()),
                  'cudnn_version': cudnn_version,
                  'libraries_loaded': loaded,
                  'matmul_f32_8192_tflops': round(tflops, 1),
                  'memory_stats': {k: v for k, v in (gpu.memory_stats() or {}).items()
                                   if k in ('bytes_limit', 'bytes_in_use')}}))
EOF
}

for step in "${steps[@]}"; do
  say "== $step"
  case "$step" in
    facts)
      { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
        ls /usr/local/cuda/bin/ptxas && /usr/local/cuda/bin/ptxas --version | tail -1
        grep -h 'define CUDNN_M' /usr/include/cudnn_version*.h /usr/include/x86_64-linux-gnu/cudnn_version*.h 2>/dev/null
        ldconfig -p | grep -E 'libcudnn.so|libcublas|libcudart|libnccl.so' | head
        echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"; uname -r; head -2 /etc/os-release
      } >> "$log" 2>&1 ;;
    jax)
      line=$(jax_check bundle 2>>"$log" | tail -1)
      say "$line"; [ -n "$line" ] && record "$line"
      case "$line" in
        *'"platform": "gpu"'*) ;;
        *) say "JAX has no GPU; why:"
           "$py" -c 'import jax; print(jax.devices("cuda"))' 2>&1 | tail -15 | tee -a "$log"
           exit 3 ;;
      esac ;;
    learners)
      for config in ${PROOF_LEARNERS:-dqn_atari r2d2_atari impala_atari}; do
        timeout "${PROOF_LEARNER_TIMEOUT:-240}" "$py" bench/learner.py --config="$config" \
          --seconds=10 --alone_only --out="/tmp/proof/$config" >> "$log" 2>&1
        if [ -f "/tmp/proof/$config/learner.json" ]; then
          record "$(tr -d '\n' < "/tmp/proof/$config/learner.json")"
          say "$config: $(grep -h alone_sgd_steps_per_second "/tmp/proof/$config/learner.json")"
        else say "$config: no figure (see proof.log)"; fi
      done ;;
    main)
      "$py" launch.py --config=ppo_mujoco --dry_run >> "$log" 2>&1
      start=$(date +%s)
      timeout "${PROOF_MAIN_SECONDS:-150}" "$py" launch.py --config=ppo_mujoco \
        --config.max_actor_steps="${PROOF_MAIN_STEPS:-300000}" \
        --workdir=/tmp/proof/runs --run_name=main >> "$log" 2>&1
      rc=$?
      record "{\"step\": \"main\", \"rc\": $rc, \"seconds\": $(( $(date +%s) - start ))}"
      "$py" - /tmp/proof/runs/main "$out/nodes.json" <<'EOF' 2>&1 | tee -a "$log"
import glob, json, os, sys
run, path = sys.argv[1:]
nodes = {}
for f in sorted(glob.glob(os.path.join(run, 'nodes', '*.json'))):
  with open(f) as fh:
    nodes[os.path.basename(f)[:-5]] = json.load(fh)
with open(path, 'w') as fh:
  json.dump(nodes, fh, indent=1)
for name, n in nodes.items():
  if not isinstance(n, dict) or 'jax_platform' not in n:
    continue
  print(name, n['jax_platform'], n.get('jax_device_kinds'),
        'limit', n.get('jax_memory_limit_bytes'),
        'fraction', n['env'].get('XLA_PYTHON_CLIENT_MEM_FRACTION'),
        'CUDA_VISIBLE_DEVICES', n['env'].get('CUDA_VISIBLE_DEVICES'))
EOF
      tail -3 /tmp/proof/runs/main/metrics/progress.csv >> "$log" 2>/dev/null ;;
    inference)
      timeout 300 "$py" bench/inference.py --configs=r2d2_atari --seconds=20 --settle=15 \
        --batch_sizes=1,4,8,16,32 --out=/tmp/proof/inference -- --config.num_actors=4 \
        >> "$log" 2>&1
      if [ -f /tmp/proof/inference/inference.json ]; then
        record "$(tr -d '\n' < /tmp/proof/inference/inference.json)"
        say "inference: $(grep -h 'central' "$log" | tail -2 | tr '\n' ' ')"
      else say "inference: no figure (see proof.log)"; fi ;;
    cores)
      timeout 200 "$py" bench/throughput.py --backends=envpool_async --cells=1x16,1x64 \
        --seconds=15 >> "$log" 2>&1
      timeout 200 "$py" bench/learner.py --config=sac_mujoco --seconds=30 --settle=15 \
        --out=/tmp/proof/sac >> "$log" 2>&1
      [ -f /tmp/proof/sac/learner.json ] && record "$(tr -d '\n' < /tmp/proof/sac/learner.json)" ;;
    hostcudnn)
      lib=$(ldconfig -p | awk '/libcudnn.so.9 / {print $NF; exit}')
      [ -n "$lib" ] || lib=$(ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 2>/dev/null | head -1)
      say "host cuDNN: ${lib:-none found}"
      mv "$site/nvidia/cudnn" /tmp/bundled-cudnn
      line=$(LD_LIBRARY_PATH="$(dirname "${lib:-/nonexistent/x}"):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
        jax_check host 2>>"$log" | tail -1)
      mv /tmp/bundled-cudnn "$site/nvidia/cudnn"
      say "${line:-host cuDNN: no result (see proof.log)}"; [ -n "$line" ] && record "$line" ;;
    *) say "unknown step $step" ;;
  esac
done
say "done"
