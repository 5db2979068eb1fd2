"""Helpers shared by the test suite (tests/) and the benchmarks (bench/).

Both start the real launcher as a user would and read back what it wrote;
keeping those helpers here, inside the package, lets both import them
without putting the checkout on sys.path by hand and keeps one copy of
each. No user-facing API: nothing else in the package imports this (it is
the top import layer, pyproject.toml), and what it holds may change with the
tests.

  cluster.py   a Ray cluster of network namespaces on this machine (root)
  launcher.py  `launch.py` in a subprocess: run, start, wait, kill, processes
  rundir.py    a run directory read back: progress, node records, JSON
  report.py    figures as the bench tables print them
  bench.py     a bench/ script imported as a module, for tests that reuse it
"""
