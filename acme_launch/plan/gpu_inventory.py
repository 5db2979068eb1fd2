"""Which GPUs this machine has: NVML, then nvidia-smi, or an injected file.

Indices are NVML's (= nvidia-smi's), which follow PCI bus order; the planner
sets `CUDA_DEVICE_ORDER=PCI_BUS_ID` in every node so that CUDA numbers the
devices the same way. No driver, no NVML library and no nvidia-smi all mean
an empty inventory: the whole program then runs on the CPU.

An injected inventory (`--gpu_inventory=FILE`) is a JSON list of
`{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559}` objects,
so plans for machines we are not on can be made and tested.
"""

import dataclasses
import json
import os
import subprocess
import sys
from typing import Optional, Tuple

from absl import logging

from acme_launch import errors


@dataclasses.dataclass(frozen=True)
class GpuInfo:
  index: int        # nvidia-smi / PCI bus order index.
  name: str         # Model, e.g. 'NVIDIA A100-SXM4-80GB'.
  memory_mb: int    # Total memory in MiB.


def read_inventory(inventory_path: str = '',
                   visible: Optional[str] = None) -> Tuple[GpuInfo, ...]:
  """GPUs of this machine, or those listed in the JSON file at the path.

  Only those `visible` names (the launcher's CUDA_VISIBLE_DEVICES, or a
  sweep slot's: plan/host.py), when it is given: a sweep (or a user) hands a
  launcher a slice of the host's GPUs that way.
  """
  if inventory_path:
    gpus = _from_file(inventory_path)
  else:
    gpus = _from_nvml()
    if gpus is None:
      gpus = _from_nvidia_smi()
  return visible_to_launcher(gpus or (), visible)


def visible_to_launcher(gpus: Tuple[GpuInfo, ...],
                        visible: Optional[str]) -> Tuple[GpuInfo, ...]:
  """The GPUs among `gpus` that CUDA_VISIBLE_DEVICES=`visible` names.

  Read as nvidia-smi indices (the planner sets CUDA_DEVICE_ORDER=PCI_BUS_ID
  in every node, so they mean the same GPUs there). None keeps all.
  """
  if visible is None:
    return gpus
  entries = [e.strip() for e in visible.split(',') if e.strip()]
  if not all(e.isdigit() for e in entries):
    raise errors.LaunchError(
        f'CUDA_VISIBLE_DEVICES={visible!r}: the launcher reads GPU indices '
        "(nvidia-smi numbering) such as '0,1'; set those or unset it")
  wanted = {int(e) for e in entries}
  return tuple(g for g in gpus if g.index in wanted)


def _check(gpus: Tuple[GpuInfo, ...], source: str) -> Tuple[GpuInfo, ...]:
  indices = [g.index for g in gpus]
  if len(set(indices)) != len(indices):
    raise errors.LaunchError(f'GPU inventory {source} lists an index twice: '
                             f'{indices}')
  return tuple(sorted(gpus, key=lambda g: g.index))


def _from_file(path: str) -> Tuple[GpuInfo, ...]:
  try:
    with open(path) as f:
      entries = json.load(f)
  except OSError as e:
    raise errors.LaunchError(
        f'cannot read GPU inventory {path}: {e.strerror}') from e
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise errors.LaunchError(f'GPU inventory {path} is not JSON: {e}') from e
  example = '[{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_mb": 81920}]'
  if not isinstance(entries, list):
    raise errors.LaunchError(
        f'GPU inventory {path} must be a JSON list like {example}')
  gpus = []
  for entry in entries:
    ok = (isinstance(entry, dict) and
          set(entry) == {'index', 'name', 'memory_mb'} and
          type(entry['index']) is int and entry['index'] >= 0 and
          isinstance(entry['name'], str) and entry['name'] and
          type(entry['memory_mb']) is int and entry['memory_mb'] > 0)
    if not ok:
      raise errors.LaunchError(
          f'GPU inventory {path}: bad entry {json.dumps(entry)}; each entry '
          f'needs exactly index (int >= 0), name (str), memory_mb (int > 0), '
          f'e.g. {example}')
    gpus.append(GpuInfo(entry['index'], entry['name'], entry['memory_mb']))
  return _check(tuple(gpus), path)


def _from_nvml() -> Optional[Tuple[GpuInfo, ...]]:
  """None when NVML is unusable (no library or driver): try nvidia-smi."""
  try:
    import pynvml
  except ImportError:
    return None
  try:
    pynvml.nvmlInit()
  except pynvml.NVMLError as e:
    logging.debug('NVML unavailable (%s); trying nvidia-smi', e)
    return None
  try:
    gpus = []
    for i in range(pynvml.nvmlDeviceGetCount()):
      handle = pynvml.nvmlDeviceGetHandleByIndex(i)
      name = pynvml.nvmlDeviceGetName(handle)
      if isinstance(name, bytes):  # Older nvidia-ml-py returns bytes.
        name = name.decode()
      memory_mb = pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
      gpus.append(GpuInfo(i, name, int(memory_mb)))
    return _check(tuple(gpus), 'from NVML')
  except pynvml.NVMLError as e:
    logging.warning('NVML failed while listing GPUs (%s); trying nvidia-smi', e)
    return None
  finally:
    try:
      pynvml.nvmlShutdown()
    except pynvml.NVMLError:
      pass


def _from_nvidia_smi() -> Tuple[GpuInfo, ...]:
  try:
    result = subprocess.run(
        ['nvidia-smi', '--query-gpu=index,name,memory.total',
         '--format=csv,noheader,nounits'],
        capture_output=True, text=True, timeout=30, check=False)
  except (OSError, subprocess.TimeoutExpired):
    return ()
  if result.returncode != 0:
    return ()
  return parse_nvidia_smi(result.stdout)


def parse_nvidia_smi(output: str) -> Tuple[GpuInfo, ...]:
  """Parses `index, name, memory` lines; skips lines it cannot read."""
  gpus = []
  for line in output.splitlines():
    fields = [f.strip() for f in line.split(',')]
    if len(fields) < 3 or not line.strip():
      continue
    try:
      # A model name could hold a comma: the index is first, memory last.
      gpus.append(GpuInfo(int(fields[0]), ', '.join(fields[1:-1]),
                          int(float(fields[-1]))))
    except ValueError:
      logging.warning('nvidia-smi: cannot read GPU line %r; skipping it', line)
  return _check(tuple(gpus), 'from nvidia-smi')


def jax_opens_gpus(timeout_seconds: float = 90.0) -> Tuple[bool, str]:
  """(whether the installed jaxlib can open this machine's GPUs, why not).

  Asked once per launch, in a child process, so the launcher's own JAX
  stays on the CPU: an NVIDIA GPU with the CPU-only jaxlib (the lock's
  default) would otherwise be planned, and its nodes would die at start with
  "Unable to initialize backend 'cuda'".
  """
  env = {k: v for k, v in os.environ.items() if k != 'CUDA_VISIBLE_DEVICES'}
  env['JAX_PLATFORMS'] = 'cuda'
  try:
    result = subprocess.run(
        [sys.executable, '-c',
         'import jax; print(len(jax.devices("cuda")))'],
        env=env, capture_output=True, text=True, timeout=timeout_seconds,
        check=False)
  except subprocess.TimeoutExpired:
    return False, f'jax did not open the GPUs within {timeout_seconds:.0f} s'
  if result.returncode == 0 and result.stdout.strip() not in ('', '0'):
    return True, ''
  lines = [l.strip() for l in result.stderr.splitlines() if l.strip()]
  reason = lines[-1] if lines else f'exit code {result.returncode}'
  return False, ' '.join(reason.split())[:200]
