"""A taken launch run to its end: the launch type's supervisor, the
whole-program resumes of --auto_resume, the summary printed and written.

The last step of the launcher's flow (cli.py, api.py): prepare.py decided
everything, act.py took the run directory (and started the fork server);
this starts the processes (run/local_mp/, run/threads.py, run/ray/) and
reads what happened back from the run directory. It reads the decision
alone: no flags, no Options.
"""

import collections
import importlib.metadata
import math
import os
import shutil
import sys
import tempfile
from typing import Callable, Optional

from acme_launch import credentials
from acme_launch import errors
from acme_launch.act import Taken
from acme_launch.plan import topology
from acme_launch.prepare import Launch
from acme_launch.run import rundir


def _package_versions() -> dict:
  return {d.metadata['Name']: d.version
          for d in importlib.metadata.distributions()}


def _write_run_config(run_dir, config_name, config, built, plan, seeds,
                      launch_type, argv, python_path) -> None:
  from acme_launch import layout
  from acme_launch.program import build as program_lib
  layout.write_json_atomic(layout.config_path(run_dir), {
      'config_name': config_name,
      'config': config.to_dict(),
      'identity': built.identity,
      'launch_type': launch_type,
      # Credentials in it (a --tracking_uri's) masked: credentials.py.
      'argv': credentials.mask_all(argv),
      'python_path': list(python_path),
      'node_seeds': seeds,
      'final_eval_seeds': program_lib.FINAL_EVAL_SEEDS,
      'resource_plan': [
          {'node': p.node, 'group': p.group, 'label': p.label,
           'gpus': list(p.gpus), 'cores': list(p.cores), 'env': dict(p.env)}
          for p in plan.placements],
      'python': sys.version,
      'packages': _package_versions(),
  })


def run_and_report(taken: Taken) -> int:
  """Runs the taken program to its end; writes and prints the summary."""
  # The fork server act.py started, until the first supervisor adopts it.
  fork_server = [taken.fork_server] if taken.fork_server is not None else []
  try:
    return _run_and_report(taken, fork_server)
  finally:
    for server in fork_server:  # No supervisor took it.
      server.stop()


def _run_and_report(taken: Taken, fork_server: list) -> int:
  if taken.launch.launch_type in ('local_mp', 'ray'):
    return _report_run(taken, fork_server)
  # local_mt, test_mt: the nodes are threads of this process, which ends by
  # os._exit, without exit handlers: what libraries leave in the temp folder
  # to delete at exit (TF's AutoGraph files, W&B's media folders) would
  # stay. So its temp folder (and its children's) is a private one, removed
  # before it exits.
  from acme_launch import safe_dirs
  temp = safe_dirs.private_temp_folder('acme-launch-run-',
                                       "launcher's temp folder")
  tempfile.tempdir = os.environ['TMPDIR'] = temp
  try:
    return _report_run(taken, fork_server, exit_after=lambda: shutil.rmtree(
        temp, ignore_errors=True))
  finally:
    shutil.rmtree(temp, ignore_errors=True)


def _report_run(taken: Taken, fork_server: list,
                exit_after: Optional[Callable[[], None]] = None) -> int:
  """The run and its summary; with `exit_after`, calls it and ends this
  process by os._exit."""
  from acme_launch.run import progress as progress_lib
  from acme_launch.run import summary as summary_lib
  from acme_launch import layout
  from acme_launch.program import build as program_lib
  launch = taken.launch
  launch_type, config, config_name = (launch.launch_type, launch.config,
                                      launch.config_name)
  built, run_dir, resume = launch.built, launch.run_dir, taken.resume
  supervision = launch.supervision
  for note in launch.notes + taken.notes:
    print(f'acme-launch: {note}', file=sys.stderr)
  if launch.exposed_reason:
    print(f'acme-launch: warning: {launch.exposed_reason}; '
          '--allow_exposed_listeners: Reverb and Courier servers listen on '
          'every network interface', file=sys.stderr)
  for warning in resume.warnings:
    print(f'acme-launch: warning: {warning}', file=sys.stderr)
  restored_steps = int(resume.counts.get('actor_steps', 0))
  if restored_steps >= config.max_actor_steps:
    print(f'acme-launch: {run_dir} already has {restored_steps:,} actor steps, '
          f'the budget is {config.max_actor_steps:,}: nothing to do. Raise '
          '--config.max_actor_steps to train further.')
    # Its summary says so, for whoever launched it (a sweep's point) even
    # when the launch that reached the budget ended before writing one.
    layout.write_json_atomic(layout.summary_path(run_dir), summary_lib.at_budget(
        run_dir, config.max_actor_steps, resume.counts))
    return 0
  _write_run_config(run_dir, config_name, config, built, launch.plan,
                    program_lib.node_seeds(config), launch_type, launch.argv,
                    launch.python_path)
  rundir.clear_live_files(run_dir)
  resumed = (f'; resuming from {restored_steps:,} actor steps'
             if resume.checkpoints else '')
  print(f'acme-launch: {config_name} ({config.agent} on {config.env_name}), '
        f'{len(built.program.get_all_nodes())} nodes, {launch_type}; '
        f'run directory {run_dir}{resumed}', flush=True)
  if launch.debug_node:
    print(f'acme-launch: {launch.debug_node} runs in this terminal (stdin '
          'attached); the other nodes log to logs/ in the run directory; no '
          'progress lines while debugging.', flush=True)
  tracker = _open_tracker(launch)
  reporter = progress_lib.ProgressReporter(
      run_dir, config.max_actor_steps,
      # A debugger prompt in this terminal must not be interleaved.
      every_seconds=(math.inf if launch.debug_node
                     else supervision.progress_every),
      # Node output echoed here would tear a live bar: plain lines then.
      interactive=False if (supervision.show_output or launch.debug_node or
                            launch_type not in ('local_mp', 'ray')) else None)
  with reporter:
    outcome, auto_resumes = _run_until_done(
        taken, fork_server, _Watchers(reporter, tracker))

  summary = summary_lib.make_summary(run_dir, outcome, config.max_actor_steps,
                                     restored_steps, auto_resumes)
  layout.write_json_atomic(layout.summary_path(run_dir), summary)
  if tracker is not None:
    tracker.finish(summary, outcome.exit_code, _plots(run_dir))
  if outcome.failed_node:
    print(f'\nacme-launch: node {outcome.failed_node} failed; the end of its log:\n'
          f'{outcome.failed_log_tail}', file=sys.stderr)
  elif outcome.reason == 'low_disk_space':
    print(f'\nacme-launch: {outcome.failed_log_tail}', file=sys.stderr)
  print('\n' + summary_lib.format_summary(summary))
  print(f'run directory      {run_dir}')
  if exit_after is not None:
    # Node threads blocked in C (Reverb, TF) would hold up interpreter exit.
    exit_after()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(outcome.exit_code)
  return outcome.exit_code


class _Watchers:
  """What the supervisor's loop updates: the progress display and the
  tracker (None without --tracking)."""

  def __init__(self, reporter, tracker):
    self._reporter, self._tracker = reporter, tracker

  def update(self) -> None:
    self._reporter.update()
    if self._tracker is not None:
      self._tracker.update()


def _open_tracker(launch: Launch):
  """--tracking's runs opened (or reopened on resume), or None."""
  if not launch.tracking:
    return None
  from acme_launch.tracking import run as tracking_run
  from acme_launch.sweep import record as sweep_record
  parent = os.path.dirname(launch.run_dir)
  group = (os.path.basename(parent) if sweep_record.is_sweep_dir(parent)
           else '')
  params = tracking_run.flatten({
      'config_name': launch.config_name, 'launch_type': launch.launch_type,
      'config': launch.config.to_dict()})
  tracker = tracking_run.Tracker(launch.run_dir, launch.tracking,
                                 os.path.basename(launch.run_dir), params,
                                 group=group)
  for line in tracker.describe():
    print(f'acme-launch: tracking to {line}', flush=True)
  return tracker


def _plots(run_dir: str):
  """The run's plots (plot.py) made into RUN_DIR/plots, and summary.json:
  the files the tracking runs get."""
  from acme_launch import layout
  from acme_launch.run import summary as summary_lib
  files = [layout.summary_path(run_dir)]
  try:
    from acme_launch import plot
    out = os.path.join(run_dir, 'plots')
    os.makedirs(out, exist_ok=True)
    if summary_lib.evaluation_rows(run_dir):
      files.append(os.path.join(out, 'eval_return.png'))
      plot.plot_eval_return(run_dir, files[-1])
    if os.path.isfile(os.path.join(run_dir, 'metrics', 'progress.csv')):
      files.append(os.path.join(out, 'steps_per_second.png'))
      plot.plot_steps_per_second(run_dir, files[-1])
  except Exception as e:
    print(f'acme-launch: warning: no plots for the tracking runs '
          f'({type(e).__name__}: {e})', file=sys.stderr)
  return [path for path in files if os.path.isfile(path)]


def _run_once(taken: Taken, fork_server: list, built, reporter,
              max_wall_time: float):
  """One run of `built` by the launch type's supervisor: its Outcome."""
  launch = taken.launch
  supervision = launch.supervision
  common = dict(show_output=supervision.show_output, reporter=reporter,
                max_wall_time=max_wall_time,
                max_node_restarts=supervision.max_node_restarts,
                python_path=launch.python_path,
                compilation_cache=taken.compilation_cache)
  if launch.launch_type == 'ray':
    from acme_launch.run.ray import launch as ray_launch
    runner = ray_launch.RaySupervisor(
        launch.run_dir, launch.cluster,
        allow_public_address=supervision.allow_public_cluster_address,
        run_key=supervision.run_key, **common)
    return runner.run_cluster(built, launch.plan)
  if launch.launch_type != 'local_mp':  # local_mt, test_mt
    from acme_launch.run import threads
    runner = threads.ThreadSupervisor(launch.run_dir, pdb=launch.pdb, **common)
    return runner.run_threads(built, launch.launch_type)
  from acme_launch.run.local_mp import launch as local_mp
  # The fork server act.py started goes to the first run's supervisor.
  early_fork_server = fork_server.pop() if fork_server else None
  runner = local_mp.Supervisor(
      launch.run_dir, preload=launch.preload,
      early_fork_server=early_fork_server,
      debug_node=launch.debug_node, pdb=launch.pdb,
      node_log_max_bytes=supervision.node_log_max_bytes,
      node_start=supervision.node_start,
      disk_guard_bytes=supervision.disk_guard_bytes,
      run_key=supervision.run_key, **common)
  return runner.run_multiprocess(built, launch.plan)


def _run_until_done(taken: Taken, fork_server: list, reporter):
  """Runs the program; with --auto_resume, again from its checkpoints after
  a stateful node's failure. Returns (outcome, auto resumes made); the
  outcome's wall time and node restarts cover every attempt."""
  from acme_launch.run import resume as resume_lib
  from acme_launch.program import build as program_lib
  launch = taken.launch
  max_wall_time = launch.supervision.max_wall_time
  auto_resume = launch.supervision.auto_resume
  built = launch.built
  wall_time, node_restarts, resumes = 0.0, collections.Counter(), 0
  while True:
    outcome = _run_once(taken, fork_server, built, reporter,
                        max_wall_time=(max_wall_time - wall_time
                                       if max_wall_time else 0.0))
    wall_time += outcome.wall_time
    node_restarts.update(outcome.restarts)
    if (outcome.reason != 'node_failed' or resumes >= auto_resume or
        topology.restartable(outcome.failed_node)):
      break
    resumes += 1
    print(f'acme-launch: node {outcome.failed_node} failed; resuming the whole '
          f'program from its last checkpoints (--auto_resume: {resumes} of '
          f'{auto_resume}). The end of its log:\n'
          f'{outcome.failed_log_tail}', file=sys.stderr, flush=True)
    try:
      for warning in resume_lib.verify_for_resume(launch.run_dir).warnings:
        print(f'acme-launch: warning: {warning}', file=sys.stderr)
    except errors.LaunchError as e:
      print(f'acme-launch: cannot resume: {e}', file=sys.stderr)
      break
    # Nodes are bound to their first launch's addresses: build them anew.
    built = program_lib.make_program(launch.config, launch.plan, launch.run_dir)
  outcome.wall_time = wall_time
  outcome.restarts = dict(node_restarts)
  return outcome, resumes

