"""Statistics of results: pure functions of arrays, no launcher imports.

A deep-RL result moves a lot from seed to seed, so a mean +- std over a
handful of runs says little (Agarwal et al. 2021, "Deep RL at the Edge of
the Statistical Precipice"). This package gives what their `rliable`
library gives, in its layout: `metrics` (point estimates of a runs x tasks
score matrix: IQM, median, mean, probability of improvement, the score
distribution), `library` (stratified bootstrap intervals and performance
profiles), and `spread` (one run's final evaluation: median, lowest,
highest, and whether its episodes split into groups far apart).

Why not rliable itself at run time: it needs `arch`, which needs
`statsmodels` and `patsy`, and rliable is an sdist; the estimators are a
few lines of numpy. The test suite checks these against rliable 1.2.0 on
fixed arrays (tests/stats/test_against_rliable.py, where it is installed:
requirements-dev.txt). The summary, the sweep table, bench/learning.py,
`python -m acme_launch.compare` and the plots all read them from here.
"""
