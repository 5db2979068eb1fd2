"""Moves a bundled CPython + venv to a new path (scripts/bundle.sh's helper).

A venv is not relocatable as it stands: `pyvenv.cfg` names the interpreter's
directory, `bin/python3.10` is an absolute symlink to it, and every console
script's shebang (and the activate scripts) name the venv's own path. A pyenv
CPython built with `--enable-shared` finds `libpython3.10.so` through an
absolute RUNPATH. Two steps fix these, with no tool beyond this interpreter:

    python relocate.py runpath PREFIX OLD_PREFIX   # at bundle time
    python relocate.py install ROOT NEW_ROOT       # on the target

`runpath` rewrites, in every ELF file under PREFIX (a staged copy), each
RUNPATH/RPATH entry inside OLD_PREFIX to one relative to the file
(`$ORIGIN/../lib`), in place, as chrpath does: the new string must not be
longer than the old one. `install` reads ROOT/bundle.json (the paths the
bundle was made from), points the venv at NEW_ROOT/python and
NEW_ROOT/acme-launch/.venv, and records NEW_ROOT there; the installer runs it
once for the staging directory (to check imports there) and once more for
the final path just before the rename.
"""

import json
import os
import struct
import sys

_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 5, 15, 29


def _dynamic_paths(data: bytes):
  """[(file offset, string)] of an ELF64 little-endian file's RPATH/RUNPATH."""
  if data[:4] != b'\x7fELF' or data[4] != 2 or data[5] != 1:
    return []
  phoff, = struct.unpack_from('<Q', data, 0x20)
  phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
  loads, dynamic = [], None
  for i in range(phnum):
    p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
        '<IIQQQQ', data, phoff + i * phentsize)
    if p_type == _PT_LOAD:
      loads.append((p_vaddr, p_offset, p_filesz))
    elif p_type == _PT_DYNAMIC:
      dynamic = (p_offset, p_filesz)
  if dynamic is None:
    return []
  entries, strtab = [], None
  for off in range(dynamic[0], dynamic[0] + dynamic[1], 16):
    tag, value = struct.unpack_from('<qQ', data, off)
    if tag == _DT_NULL:
      break
    if tag == _DT_STRTAB:
      strtab = value
    elif tag in (_DT_RPATH, _DT_RUNPATH):
      entries.append(value)
  if strtab is None or not entries:
    return []
  base = next((offset + strtab - vaddr for vaddr, offset, size in loads
               if vaddr <= strtab < vaddr + size), None)
  if base is None:
    return []
  paths = []
  for value in entries:
    start = base + value
    paths.append((start, data[start:data.index(b'\0', start)].decode()))
  return paths


def patch_runpaths(prefix: str, old_prefix: str) -> int:
  """Makes RUNPATHs inside old_prefix relative ($ORIGIN); returns files changed."""
  changed = 0
  old_prefix = old_prefix.rstrip('/')
  for dirpath, _, filenames in os.walk(prefix):
    for name in filenames:
      path = os.path.join(dirpath, name)
      if os.path.islink(path) or not os.path.isfile(path):
        continue
      with open(path, 'rb') as f:
        if f.read(4) != b'\x7fELF':
          continue
        f.seek(0)
        data = f.read()
      patches = []
      for offset, value in _dynamic_paths(data):
        parts = []
        for part in value.split(':'):
          if part == old_prefix or part.startswith(old_prefix + '/'):
            target = os.path.join(prefix, os.path.relpath(part, old_prefix))
            relative = os.path.relpath(target, dirpath)
            part = '$ORIGIN' + ('' if relative == '.' else '/' + relative)
          parts.append(part)
        new = ':'.join(parts)
        if new == value:
          continue
        if len(new) > len(value):
          raise SystemExit(
              f'acme-launch: error: cannot relocate {path}: its RUNPATH '
              f'{value!r} is shorter than {new!r}; rebuild the interpreter '
              'under a longer prefix (e.g. pyenv\'s default) or without '
              '--enable-shared')
        patches.append((offset, new.encode().ljust(len(value), b'\0')))
      if patches:
        mode = os.stat(path).st_mode
        os.chmod(path, mode | 0o200)
        with open(path, 'r+b') as f:
          for offset, raw in patches:
            f.seek(offset)
            f.write(raw)
        os.chmod(path, mode)
        changed += 1
  return changed


def _rewrite_dir(directory: str, mapping) -> None:
  """Symlink targets and text files (shebangs, activate scripts) in
  `directory`: each old path replaced by its new one, longest first."""
  mapping = sorted(mapping, key=lambda pair: -len(pair[0]))
  for name in os.listdir(directory):
    path = os.path.join(directory, name)
    if os.path.islink(path):
      target = os.readlink(path)
      for old, new in mapping:
        if target == old or target.startswith(old + '/'):
          os.unlink(path)
          os.symlink(new + target[len(old):], path)
          break
      continue
    if not os.path.isfile(path):
      continue
    with open(path, 'rb') as f:
      data = f.read()
    if b'\0' in data[:8192]:
      continue
    new_data = data
    for old, new in mapping:
      new_data = new_data.replace(old.encode(), new.encode())
    if new_data != data:
      with open(path, 'wb') as f:
        f.write(new_data)


def install(root: str, new_root: str) -> None:
  """Points the venv under `root` at `new_root` (where root will be renamed)."""
  info_path = os.path.join(root, 'bundle.json')
  with open(info_path) as f:
    info = json.load(f)
  new_python = os.path.join(new_root, 'python')
  new_venv = os.path.join(new_root, 'acme-launch', '.venv')
  mapping = [(info['python_prefix'], new_python), (info['venv'], new_venv)]
  venv = os.path.join(root, 'acme-launch', '.venv')
  _rewrite_dir(os.path.join(venv, 'bin'), mapping)
  _rewrite_dir(os.path.join(root, 'python', 'bin'), mapping)
  cfg_path = os.path.join(venv, 'pyvenv.cfg')
  with open(cfg_path) as f:
    lines = f.read().splitlines()
  with open(cfg_path, 'w') as f:
    for line in lines:
      key = line.split('=', 1)[0].strip()
      if key == 'home':
        line = f'home = {os.path.join(new_python, "bin")}'
      elif key in ('executable', 'command'):
        for old, new in mapping:
          line = line.replace(old, new)
      f.write(line + '\n')
  # scripts/setup.sh then leaves this venv as it is (no index to install from).
  with open(os.path.join(venv, '.acme-launch-bundle'), 'w') as f:
    f.write(f'JAX build: {info["jax_build"]}, made {info["created"]}\n')
  info.update(python_prefix=new_python, venv=new_venv)
  with open(info_path, 'w') as f:
    json.dump(info, f, indent=2)


def main(argv) -> None:
  if len(argv) == 4 and argv[1] == 'runpath':
    print(f'acme-launch: made the RUNPATH of {patch_runpaths(argv[2], argv[3])} '
          'file(s) relative', file=sys.stderr)
  elif len(argv) == 4 and argv[1] == 'install':
    install(os.path.abspath(argv[2]), os.path.abspath(argv[3]))
  else:
    raise SystemExit(__doc__)


if __name__ == '__main__':
  main(sys.argv)
