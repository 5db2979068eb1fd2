"""Run directory layout: one folder per run, chosen by the launcher.

    <workdir>/<run_name>/
      config.json     resolved config, resource plan, node seeds, versions
      checkpoints/    learner/, counter/ (TF checkpointer), replay/ (Reverb)
      logs/           one file per node process: <label>_<index>.log
      metrics/        one CSV per node: actor_0.csv, evaluator_0.csv, ...,
                      progress.csv (counter totals each second), and
                      tensorboard/<node>/ event files
      nodes/          what each node process received (env, devices)
      progress.json   counter totals, rewritten four times a second while running
      summary.json    final figures, written by the launcher at exit
      tracking.json   with --tracking: W&B / MLflow run ids, rows sent
      videos/         with config.eval_video_every: evaluation episodes
                      filmed while it trains (<node>-<actor steps>.mp4)
      wandb/, mlruns/ with --tracking: W&B offline runs, MLflow file store
"""

import errno
import json
import os
from typing import Any, List

from acme_launch import durable
from acme_launch.plan import node_env
from acme_launch.plan import topology


def checkpoints_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'checkpoints')


def component_dir(run_dir: str, component: str) -> str:
  """checkpoints/<component>: 'learner', 'counter' or 'replay'."""
  return os.path.join(checkpoints_dir(run_dir), component)


# The components saved by TF's checkpointer (replay: Reverb's own).
COMPONENTS = ('learner', 'counter')
REVERB_DONE_FILE = 'DONE'  # Reverb writes it last into a complete checkpoint.


def complete_replay_checkpoints(replay_dir: str) -> List[str]:
  """Reverb checkpoint folders with their DONE marker, oldest first."""
  if not os.path.isdir(replay_dir):
    return []
  return sorted(
      os.path.join(replay_dir, name) for name in os.listdir(replay_dir)
      if os.path.isfile(os.path.join(replay_dir, name, REVERB_DONE_FILE)))


def logs_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'logs')


def nodes_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'nodes')


def learner_save_request_path(run_dir: str) -> str:
  """A request for a learner checkpoint now (a population's member that
  another copies, sweep/trials.py): {'token': T}; the learner node answers
  in learner_saved_path once it saved."""
  return os.path.join(nodes_dir(run_dir), 'learner_save_request.json')


def learner_saved_path(run_dir: str) -> str:
  """{'token': T, 'checkpoint': PREFIX}: the save made for request T."""
  return os.path.join(nodes_dir(run_dir), 'learner_saved.json')


def metrics_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'metrics')


def metrics_path(run_dir: str, node: str) -> str:
  return os.path.join(metrics_dir(run_dir), topology.file_stem(node) + '.csv')


def tensorboard_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'metrics', 'tensorboard')


def log_path(run_dir: str, node: str) -> str:
  return os.path.join(logs_dir(run_dir), topology.file_stem(node) + '.log')


def log_tail(path: str, lines: int = 20) -> str:
  """The last `lines` lines of a log; '' if it cannot be read."""
  try:
    with open(path, errors='replace') as f:
      return ''.join(f.readlines()[-lines:])
  except OSError:
    return ''


def progress_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'progress.json')


def summary_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'summary.json')


def config_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'config.json')


def stop_request_path(run_dir: str) -> str:
  """Where lp.stop() in a node of a Ray run asks the launcher to stop."""
  return os.path.join(run_dir, 'stop_request.json')


def on_this_host(path: str) -> str:
  """Where this process writes `path`, a path in the launcher's run directory.

  Node objects are built with the launcher's run directory; on a Ray host
  without it they write into the node's mirror, same layout. Everywhere
  else this is `path` itself.
  """
  # Set only for a node of a Ray run on a host that does not share the run
  # directory: the launcher's run directory, which that node's run_dir
  # mirrors there (run/ray/files.py ships the mirror back).
  settings = node_env.NodeEnv.from_environ()
  launcher_dir = settings.mirror_of
  if not launcher_dir:
    return path
  relative = os.path.relpath(path, launcher_dir)
  if relative == '..' or relative.startswith('../'):
    return path
  return os.path.normpath(
      os.path.join(settings.run_dir, relative))


def final_eval_path(run_dir: str) -> str:
  return os.path.join(run_dir, 'final_eval.json')


def evaluations_dir(run_dir: str) -> str:
  """`python -m acme_launch.evaluate`'s figures and videos, one new file
  (and folder) per evaluation: no node of the run writes here."""
  return os.path.join(run_dir, 'evaluations')


def videos_dir(run_dir: str) -> str:
  """The evaluator's films of its episodes while the run trains
  (config.eval_video_every): evaluator_0-<actor steps>.mp4 and
  final-<actor steps>.mp4, each renamed into place when complete."""
  return os.path.join(run_dir, 'videos')


def write_json_atomic(path: str, data: Any) -> None:
  """Writes JSON through a temp file, fsync and rename: readers never see
  half, and a crash leaves the old file or the new one (durable.write_json)."""
  durable.write_json(path, data)


def read_json(path: str, default: Any = None) -> Any:
  """The JSON at `path`; `default` if it is missing, damaged or a symbolic
  link (a run directory's files are never read through links)."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except FileNotFoundError:
    return default
  except OSError as e:
    if e.errno == errno.ELOOP:
      return default
    raise
  try:
    with os.fdopen(fd) as f:
      return json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError):
    return default
