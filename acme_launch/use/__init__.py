"""Using a run: evaluate it, film it, take its policy out.

A consumer of a run directory, as `plot` and `compare` are: it reads what a
run wrote (through `layout`, its config, its learner checkpoint), makes the
agent's evaluation policy where the evaluator node makes it
(agents/evaluation_policy.py) and plays it with the evaluator's own
episode loops (program/evaluation.py), in one process with no Launchpad
program, Reverb server or ports. Nothing in `program/` imports it, and
`import acme_launch` imports none of it: `restore` (a run and its
checkpoint's parameters), `evaluate` (episodes, their summary and, with
envs/video.py, which the evaluator node films with too, their mp4 files).
"""
