"""The launcher side of a run: supervise, restart, run directory, progress,
summary, the loopback shim; `run/ray/` for the cluster backend."""
