"""The launcher side of a run: one supervisor per launch type (`local_mp/`,
`threads.py`, `ray/`) on a shared core, restarts, run directory, progress,
summary, the loopback shim."""
