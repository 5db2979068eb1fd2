"""One point of a sweep as a Ray Tune trial: a child launcher on a slot.

Tune decides which point runs when (runner.py: its queue, how many at once,
and the scheduler); a trial does what Tune cannot: it takes a slot of this
host (cores, GPUs) that no other running trial holds, starts the point's
`launch.py` there as a child process, reports its progress from the run
directory, and stops it the way a single run is stopped.

A trial runs in a worker of the sweep's own Ray instance (local_ray.py).
Its child launcher gets:
- the sweep launcher's environment, handed over as a value (`TrialContext`),
  not the Ray worker's (Ray sets OMP_NUM_THREADS and its own variables);
  its slot's GPUs in CUDA_VISIBLE_DEVICES;
- its slot's cores (sched_setaffinity before exec) and SIGKILL when the
  worker dies (PR_SET_PDEATHSIG: a `kill -9` of the sweep launcher ends
  Ray's processes, then the child launchers, then their nodes);
- SIGINT, SIGTERM and SIGQUIT back at their defaults and unblocked: Ray's
  workers block SIGINT and ignore SIGQUIT, and a child inherits both.

Slots are taken with a lock file each in the sweep's private control folder
(`slot-N.lock`, flock): Tune runs at most as many trials as there are slots,
so a starting trial always finds one free. The sweep launcher's Ctrl-C and
SIGTERM reach the trials through that folder's `stop.json` (the signal and
how many were given; `kill` after the grace time): each trial passes every
signal once to its child launcher, and a trial set up after a stop does not
start its point at all.

A trial's results (Tune's `step`): `event` 'started' once (pid, slot, cores,
GPUs), then 'progress' every `report_seconds` (actor steps, the latest
evaluation return), then 'ended' with the exit code and reason, done. A
population's member (MemberTrial) adds its score at a boundary to its
results (`segment_steps`, `segment_return`: Tune's PBT reads them), and
'started' again after each stop it makes (a segment's end, a copy).
"""

import ctypes
import dataclasses
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ray import tune

from acme_launch import credentials
from acme_launch import layout
from acme_launch import paths
from acme_launch import safe_dirs
from acme_launch.sweep import freeze as freeze_lib
from acme_launch.sweep.slots import Slot, describe_slot

# A point's launcher: `python -m acme_launch`, which works from a checkout
# (ROOT on its PYTHONPATH) and installed alike.
LAUNCHER = ('-m', 'acme_launch')
STOP_GRACE_SECONDS = 60.0   # A child launcher stops its nodes within 30 s.
_PR_SET_PDEATHSIG = 1


@dataclasses.dataclass(frozen=True)
class TrialContext:
  """What every trial of one sweep needs, handed to it by Tune as a value
  (tune.with_parameters: through Ray's object store, never written into
  Tune's experiment files: `env` may hold credentials)."""
  sweep_dir: str
  control: str                           # Private: slot locks, stop.json.
  cwd: str                               # Where the child launchers run.
  env: Dict[str, str]                    # The sweep launcher's environment.
  slots: Tuple[Slot, ...]
  # Point name -> its launch.py flags but its run directory (a fresh one,
  # or --resume of the one it has: where_flags). A population's: less the
  # values it perturbs and the budget, which each segment sets.
  argv: Dict[str, Tuple[str, ...]]
  retries: int = 0                       # Starts again after a failure.
  report_seconds: float = 2.0
  # A population (population.py): the interval and each member's budget,
  # in actor steps; whether every member's program runs at once, each
  # through to its budget on its slot in `member_slots` (its own, or shared
  # with other members' when asked for), or they take turns, a segment at
  # a time.
  interval_steps: int = 0
  budget: Dict[str, int] = dataclasses.field(default_factory=dict)
  through: bool = False
  member_slots: Dict[str, int] = dataclasses.field(default_factory=dict)
  # Through, frozen at each boundary until the comparison (freeze.py); with
  # no `member_slots`, a member takes a free slot for each turn and gives
  # it up when frozen.
  freeze: bool = False


def where_flags(sweep_dir: str, name: str) -> Tuple[bool, List[str]]:
  """(whether it resumes, the flags that give a point's launcher its run
  directory): --resume of the one it has, else a new one."""
  run_dir = os.path.join(sweep_dir, name)
  if os.path.isfile(layout.config_path(run_dir)):
    return True, [f'--resume={run_dir}']
  return False, [f'--workdir={sweep_dir}', f'--run_name={name}']


class Retry(Exception):
  """A point's program failed and may start again (--trial_retries):
  Tune starts its trial again, which resumes the run directory."""


def _failed_once_more(control: str, name: str) -> int:
  """How many times the point's program has failed in this sweep."""
  path = os.path.join(control, f'failures-{name}')
  count = int(layout.read_json(path, 0) or 0) + 1
  layout.write_json_atomic(path, count)
  return count


def read_stop(control: str) -> Dict[str, Any]:
  """{'signal': N, 'count': K, 'kill': bool}, or {} before any stop."""
  return layout.read_json(os.path.join(control, 'stop.json'), {}) or {}


def write_stop(control: str, stop: Dict[str, Any]) -> None:
  layout.write_json_atomic(os.path.join(control, 'stop.json'), stop)


def _child_preexec(cores: Tuple[int, ...]):
  """Runs in the child before exec: its cores, its signals as a shell's,
  SIGKILL if the trial's worker dies."""
  def setup() -> None:
    os.sched_setaffinity(0, cores)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
      signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(_PR_SET_PDEATHSIG,
                                                     signal.SIGKILL)
  return setup


def _take_slot(context: TrialContext, seconds: float = float('inf')
               ) -> Optional[Tuple[Slot, int]]:
  """A free slot and the descriptor of its held lock, waiting up to
  `seconds` for one (the last holder's trial may still be ending); None if
  none was free by then."""
  deadline = time.time() + seconds
  while True:
    taken = _try_slot(context)
    if taken is not None or time.time() >= deadline:
      return taken
    time.sleep(0.2)


def _try_slot(context: TrialContext) -> Optional[Tuple[Slot, int]]:
  for slot in context.slots:
    fd = os.open(os.path.join(context.control, f'slot-{slot.index}.lock'),
                 os.O_RDWR | os.O_CREAT, 0o600)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      return slot, fd
    except BlockingIOError:
      os.close(fd)
  return None


def end_reason(run_dir: str, started: float, code: int
               ) -> Tuple[str, Dict[str, Any]]:
  """(exit reason, summary.json) of a child launcher that ended: its
  summary's reason when it wrote one in this launch, else the exit code."""
  summary = layout.read_json(layout.summary_path(run_dir), {})
  try:
    if os.path.getmtime(layout.summary_path(run_dir)) < started:
      summary = {}  # A previous launch's: this one ended before its own.
  except OSError:
    pass
  reason = summary.get('exit_reason') or (
      f'killed by signal {-code}' if code < 0 else f'exit code {code}')
  return reason, summary


def run_progress(run_dir: str) -> Dict[str, Any]:
  """Actor steps, the latest evaluation return and the actor steps it was
  taken at, of a running program."""
  from acme_launch.run import summary as summary_lib
  progress = layout.read_json(layout.progress_path(run_dir))
  if progress is None:
    return {}
  result = {'actor_steps': int(progress.get('counts', {}).get('actor_steps', 0)),
            'progress_time': float(progress.get('time', time.time()))}
  evaluations = summary_lib.evaluation_rows(run_dir)
  if evaluations:
    result['eval_return'] = float(evaluations[-1]['episode_return'])
    result['eval_steps'] = int(evaluations[-1].get('actor_steps', 0))
  return result


class PointTrial(tune.Trainable):
  """One sweep point's program, run by its child launcher in a slot."""

  def setup(self, config: Dict[str, Any], context: TrialContext) -> None:
    self._context = context
    self._name = config['point']
    self._run_dir = os.path.join(context.sweep_dir, self._name)
    self._popen: Optional[subprocess.Popen] = None
    self._signals_passed = 0
    self._announced = False
    self._lock_fd = -1
    if read_stop(context.control):
      return  # The sweep is stopping: this point is not started.
    self._slot, self._lock_fd = _take_slot(context)
    self._resumed, where = where_flags(context.sweep_dir, self._name)
    self._start([*context.argv[self._name], *where])

  def _start(self, flags: Sequence[str]) -> None:
    context, slot = self._context, self._slot
    argv = [sys.executable, *LAUNCHER, *flags]
    env = dict(context.env)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (paths.ROOT, env.get('PYTHONPATH', '')) if p)
    if slot.gpus:
      env['CUDA_VISIBLE_DEVICES'] = ','.join(map(str, slot.gpus))
      env['CUDA_DEVICE_ORDER'] = 'PCI_BUS_ID'  # nvidia-smi's numbering.
    path = os.path.join(context.sweep_dir, 'logs', self._name + '.log')
    self._log = os.fdopen(safe_dirs.open_append_nofollow(path), 'a')
    self._log.write(f'acme-launch sweep: '
                    f'{" ".join(credentials.mask_all(argv))} '
                    f'({describe_slot(slot)})\n')
    self._log.flush()
    self._started = time.time()
    self._popen = subprocess.Popen(
        argv, cwd=context.cwd or None, env=env, stdin=subprocess.DEVNULL,
        stdout=self._log, stderr=subprocess.STDOUT,
        # Our signals reach it once, passed on; a terminal's Ctrl-C not twice.
        start_new_session=True, preexec_fn=_child_preexec(slot.cores))

  def step(self) -> Dict[str, Any]:
    if self._popen is None:
      return {'event': 'not_started', 'point': self._name, 'done': True}
    if not self._announced:
      self._announced = True
      return self._started_result()
    code = self._wait()
    if code is None:
      return self._progress_result()
    return self._ended_result(code)

  def _started_result(self) -> Dict[str, Any]:
    slot = self._slot
    # Not 'pid': Tune fills that with the trial worker's own.
    return {'event': 'started', 'point': self._name,
            'launcher_pid': self._popen.pid,
            'slot': slot.index, 'cores': list(slot.cores),
            'gpus': list(slot.gpus), 'where': describe_slot(slot),
            'started': self._started,
            'resumed': self._resumed,
            'actor_steps': 0}

  def _wait(self, until: Optional[Callable[[], bool]] = None
            ) -> Optional[int]:
    """The child's exit code, or None if it still runs after a report's
    period, or once `until()` holds (the sweep's signals passed on
    meanwhile)."""
    deadline = time.time() + self._context.report_seconds
    while self._popen.poll() is None and time.time() < deadline:
      self._pass_signals()
      if until is not None and until():
        break
      time.sleep(0.2)
    return self._popen.poll()

  def _progress_result(self) -> Dict[str, Any]:
    return {'event': 'progress', 'point': self._name,
            'actor_steps': 0, **run_progress(self._run_dir)}

  def _ended_result(self, code: int) -> Dict[str, Any]:
    reason, summary = end_reason(self._run_dir, self._started, code)
    self._retry_if_allowed(code, reason)
    return {'event': 'ended', 'point': self._name, 'exit_code': code,
            'exit_reason': reason, 'ended': time.time(),
            'failed_node': summary.get('failed_node'),
            'actor_steps': int(summary.get('actor_steps') or 0),
            'done': True}

  def _retry_if_allowed(self, code: int, reason: str) -> None:
    """Raises Retry for a program that failed on its own (not stopped by
    the sweep, not refused at its start: exit 2), while retries are left."""
    if (code in (0, 2) or not self._context.retries or
        read_stop(self._context.control)):
      return
    if _failed_once_more(self._context.control,
                         self._name) <= self._context.retries:
      self._log.close()
      self._popen = None
      raise Retry(f'{self._name}: {reason}, exit {code}')

  def _pass_signals(self) -> None:
    """Each signal the sweep got, passed once to the child launcher; all
    of its processes killed once the sweep says `kill`."""
    stop = read_stop(self._context.control)
    if not stop:
      return
    if stop.get('kill'):
      self._kill()
      return
    while self._signals_passed < int(stop.get('count', 0)):
      self._signals_passed += 1
      try:
        self._popen.send_signal(int(stop['signal']))
      except ProcessLookupError:
        pass

  def _kill(self) -> None:
    try:
      os.killpg(self._popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass

  def cleanup(self) -> None:
    """Tune is done with the trial (it ended, or Tune stops it): a child
    still running is stopped as Ctrl-C stops a run (checkpoints saved),
    killed if it has not ended within the grace time."""
    if self._popen is not None and self._popen.poll() is None:
      self._popen.send_signal(signal.SIGTERM)
      try:
        self._popen.wait(STOP_GRACE_SECONDS)
      except subprocess.TimeoutExpired:
        self._kill()
        self._popen.wait()
    if self._popen is not None and not self._log.closed:
      self._log.close()
    if self._lock_fd >= 0:
      os.close(self._lock_fd)
      self._lock_fd = -1


def _member_name(control: str, trial_id: str, named: str) -> str:
  """The population member a trial is. Tune's exploit gives a trial the
  config of the member it copies, the point's name included; the name its
  trial first had is kept in the control folder."""
  path = os.path.join(control, f'member-{trial_id}')
  try:
    with open(path) as f:
      return f.read()
  except FileNotFoundError:
    with open(path, 'w') as f:
      f.write(named)
    return named


def member_steps(run_dir: str) -> int:
  """The actor steps a member's run directory holds (0 before its first)."""
  summary = layout.read_json(layout.summary_path(run_dir), {}) or {}
  progress = layout.read_json(layout.progress_path(run_dir), {}) or {}
  return max(int(summary.get('actor_steps') or 0),
             int(progress.get('counts', {}).get('actor_steps', 0)))


def learner_checkpoints(run_dir: str) -> str:
  return os.path.join(run_dir, 'checkpoints', 'learner')


def write_synced(control: str, steps: int) -> None:
  """The boundary at which the population was last compared."""
  layout.write_json_atomic(os.path.join(control, 'pbt_synced.json'),
                           {'actor_steps': steps})


def read_synced(control: str) -> int:
  return int((layout.read_json(os.path.join(control, 'pbt_synced.json'),
                               {}) or {}).get('actor_steps', 0))


# An exploit, staged in the member's run directory when the population
# decides it: the learner checkpoint it copies and the values it goes on
# with. The member's next start applies it, in this sweep or after a
# --resume, so a decision is not lost when the launcher stops before it.

def exploit_dir(run_dir: str) -> str:
  return os.path.join(run_dir, 'exploit')


def stage_exploit(run_dir: str, checkpoint: str, donor: str, at_steps: int,
                  values: Dict[str, Any], before: Dict[str, Any]) -> None:
  """Stages the learner of `checkpoint` (a Tune checkpoint folder that
  MemberTrial.save_checkpoint wrote) for the member of `run_dir`, with the
  values it goes on with and those it had (kept if the copy is dropped).
  A donor with no learner saved yet (on a Ray cluster its program's save
  may not reach this host) gives its values only, `learner_copied` false:
  this runs in Tune's scheduler callback, where a raise ends the sweep."""
  staged = exploit_dir(run_dir)
  part = staged + '.part'
  shutil.rmtree(part, ignore_errors=True)
  learner = os.path.join(checkpoint, 'learner')
  copied = os.path.isdir(learner)
  if copied:
    shutil.copytree(learner, os.path.join(part, 'learner'))
  os.makedirs(part, exist_ok=True)
  layout.write_json_atomic(os.path.join(part, 'exploit.json'), {
      'point': donor, 'actor_steps': at_steps, 'values': values,
      'before': before, 'at': time.time(), 'learner_copied': copied})
  shutil.rmtree(staged, ignore_errors=True)
  os.rename(part, staged)


def undo_exploits(sweep_dir: str, record: Dict[str, Any]) -> List[str]:
  """Before a resumed population starts: the exploits of a comparison the
  launcher was stopped in before it recorded it (`population.compared`)
  marked dropped, and each staged copy no exploit recorded by then names
  removed: the population is compared there again. The members whose
  copy is undone."""
  population = record.get('population', {})
  compared = int(population.get('compared') or 0)
  kept = set()
  for exploit in population.get('exploits', []):
    if exploit.get('dropped'):
      continue
    if exploit['actor_steps'] > compared:
      exploit['dropped'] = (
          'the sweep stopped before its comparison at '
          f'{exploit["actor_steps"]:,} actor steps was recorded: compared '
          'there again')
    else:
      kept.add((exploit['member'], exploit['copied'],
                exploit.get('copied_steps')))
  undone = []
  for entry in record['points']:
    run_dir = os.path.join(sweep_dir, entry['name'])
    shutil.rmtree(exploit_dir(run_dir) + '.part', ignore_errors=True)
    staged = staged_exploit(run_dir)
    if staged is not None and (entry['name'], staged['point'],
                               staged['actor_steps']) not in kept:
      shutil.rmtree(exploit_dir(run_dir))
      undone.append(entry['name'])
  return undone


def staged_exploit(run_dir: str) -> Optional[Dict[str, Any]]:
  """The exploit staged for a member and not applied yet, or None."""
  return layout.read_json(os.path.join(exploit_dir(run_dir), 'exploit.json'))


def first_values(run_dir: str, recorded: Dict[str, Any]) -> Dict[str, Any]:
  """A resumed member's values as Tune is to hold them: those of an
  exploit staged for it and not applied yet (its next start applies it),
  else those recorded."""
  staged = staged_exploit(run_dir)
  return dict(staged['values']) if staged is not None else recorded


def apply_staged_exploit(run_dir: str) -> Optional[Dict[str, Any]]:
  """The staged learner replaces the member's own (its program does not
  run); the exploit, or None if none was staged."""
  staged = staged_exploit(run_dir)
  if staged is None:
    return None
  copied = os.path.join(exploit_dir(run_dir), 'learner')
  if os.path.isdir(copied):  # Else moved already, by a start cut short.
    own = learner_checkpoints(run_dir)
    shutil.rmtree(own, ignore_errors=True)
    os.makedirs(os.path.dirname(own), exist_ok=True)
    os.rename(copied, own)
  shutil.rmtree(exploit_dir(run_dir))
  return staged


def boundary_score(run_dir: str, steps: int) -> Optional[float]:
  """A member's score at a boundary: the return of its first evaluation
  at or after `steps` actor steps, or None before it has one."""
  from acme_launch.run import summary as summary_lib
  for row in summary_lib.evaluation_rows(run_dir):
    if row.get('actor_steps', 0) >= steps and 'episode_return' in row:
      return float(row['episode_return'])
  return None


SAVE_WAIT_SECONDS = 60.0


class MemberTrial(PointTrial):
  """One member of a population (population.py), in one of two ways the
  sweep's plan chose (`TrialContext.through`):

  - Through (every member's program at once): its program runs to its
    budget. Its score at a boundary is its first evaluation there; it
    reports that boundary once the population compared the one before
    (`synced`), so that Tune's synchronous PBT compares all at the same
    boundary while none stops. A member that copies another is paused by
    Tune (its program stops as Ctrl-C stops a run) and starts again from
    the copied learner; a member copied has its learner saved as it is
    at the comparison (save_checkpoint, while its program runs).
  - Turns (more members than the host or cluster holds at once): its
    program runs one segment at a time, to the next boundary, where it
    stops with its checkpoints saved and reports its final evaluation
    there; Tune pauses it and starts it again for the next one.

  An exploit is staged in the member's run directory when the population
  decides it (runner.py, stage_exploit) and applied at its next start."""

  def setup(self, config: Dict[str, Any], context: TrialContext) -> None:
    self._context = context
    self._name = _member_name(context.control, self.trial_id, config['point'])
    self._run_dir = os.path.join(context.sweep_dir, self._name)
    # An exploit decided before a --resume: its values.
    self._values = first_values(self._run_dir, dict(config['values']))
    self._popen = None
    self._lock_fd = -1
    self._slot = None
    self._segment_end = 0
    self._reported = 0
    self._frozen: Optional[List[int]] = None  # Its program's stopped pids.
    self._frozen_slot = None
    self._launch_slot = None  # The slot its program planned its nodes on.
    self._evaluations_seen = ()  # (evaluator metrics file, size), as read.

  def step(self) -> Dict[str, Any]:
    if self._popen is None:
      if read_stop(self._context.control):
        return {'event': 'not_started', 'point': self._name, 'done': True}
      if self._takes_turns() and not self._wait_for_slot():
        return self._waiting_result()
      return self._start_member()
    if self._frozen is not None:
      return self._frozen_result()
    # Frozen at a boundary as soon as it has its score there, not at the
    # end of the report's period: a fast task runs thousands of actor
    # steps a second past the boundary.
    code = self._wait(self._has_next_score if self._context.freeze else None)
    if self._context.through:
      if code is not None:
        return self._ended_result(code)
      self._keep_on_slot()
      result = self._boundary_result()
      if result.get('boundary') and self._context.freeze:
        self._freeze(result)
      return result
    if code is None:
      return self._progress_result()
    budget = self._context.budget[self._name]
    reason, summary = end_reason(self._run_dir, self._started, code)
    if code != 0 or reason != 'budget_reached' or self._segment_end >= budget:
      return self._ended_result(code)  # Or Retry, resuming this segment.
    self._log.close()
    self._popen = None  # The next step starts the next segment.
    value = summary.get('final_eval_return_mean')
    if value is None:
      value = summary.get('last_eval_return')
    return {'event': 'segment', 'point': self._name,
            'segment_steps': self._segment_end,
            'segment_return': float('nan') if value is None else float(value),
            'actor_steps': int(summary.get('actor_steps') or 0),
            'ended': time.time(), 'values': dict(self._values)}

  def _start_member(self) -> Dict[str, Any]:
    from acme_launch.sweep import population
    context = self._context
    self._wait_for_last_program()
    budget = context.budget[self._name]
    staged = staged_exploit(self._run_dir)
    dropped = (context.through and staged is not None and
               member_steps(self._run_dir) >= budget)
    if dropped:
      # Its program reached the budget before it stopped to copy: it ends
      # with its own learner and values, its launch finding nothing to do
      # (or training the steps its checkpoints lack) and saying it reached
      # the budget.
      self._values = dict(staged.get('before') or self._values)
      shutil.rmtree(exploit_dir(self._run_dir))
    if context.member_slots:  # Its slot, held by no lock: it may be shared.
      self._slot = context.slots[context.member_slots[self._name]]
    elif self._lock_fd < 0:
      self._slot, self._lock_fd = _take_slot(context)
    # What this start copies: the exploit it applies, none else (a copy
    # dropped, or applied by a start before a retry, is not copied again).
    copied, staged = None, apply_staged_exploit(self._run_dir)
    if staged is not None:
      self._values = dict(staged['values'])
      copied = {'point': staged['point'],
                'actor_steps': int(staged['actor_steps']),
                'at': float(staged['at'])}
    steps = member_steps(self._run_dir)
    self._segment_end = (budget if context.through else population.segment_end(
        steps, context.interval_steps, budget, read_synced(context.control)))
    self._reported = read_synced(context.control)
    self._resumed, where = where_flags(context.sweep_dir, self._name)
    self._signals_passed = 0
    self._launch_slot = self._slot
    self._start([*context.argv[self._name], *population.flags(self._values),
                 f'--config.max_actor_steps={self._segment_end}', *where])
    result = {**self._started_result(), 'actor_steps': steps,
              'values': dict(self._values), 'copied': copied}
    if dropped:
      result['exploit_dropped'] = True
    if not context.through:
      result['segment_end'] = self._segment_end
    return result

  def _wait_for_last_program(self) -> None:
    """Until the member's last program let go of its run directory. Tune
    starts a trial it paused (to copy another member) in a new worker
    while the old worker's cleanup still stops that program, which saves
    its checkpoints as it ends: what this start reads (its steps, the copy
    to apply) is what it left, and its launch is not refused as a second
    one. Past the old cleanup's kill, the launch says why it cannot start."""
    from acme_launch.run import rundir
    deadline = time.time() + STOP_GRACE_SECONDS + 10
    while (rundir.in_use(self._run_dir) and time.time() < deadline and
           not read_stop(self._context.control)):
      time.sleep(0.2)

  def _boundary_result(self) -> Dict[str, Any]:
    """Progress, with the member's score at the next boundary once it has
    one and the population compared the boundary before: Tune's PBT reads
    `segment_steps` and `segment_return`."""
    result = self._progress_result()
    synced = read_synced(self._context.control)
    steps, score = self._next_boundary_score(synced)
    if score is None:
      steps = synced
      score = boundary_score(self._run_dir, synced) if synced else None
    result.update(segment_steps=steps,
                  segment_return=float('nan') if score is None else score)
    if steps > self._reported:
      self._reported = steps
      result.update(boundary=True, values=dict(self._values))
    return result

  def _next_boundary_score(self, synced: int) -> Tuple[int, Optional[float]]:
    """(the boundary after `synced`, the compared one; its score there, or
    None before it has one or if the budget comes first)."""
    steps = synced + self._context.interval_steps
    if steps >= self._context.budget[self._name]:
      return steps, None
    return steps, boundary_score(self._run_dir, steps)

  # Frozen at a boundary (TrialContext.freeze) ----------------------------

  def _has_next_score(self) -> bool:
    """Whether it has a score at the boundary after the one compared last
    (_boundary_result reports it), read again only once an evaluator's
    metrics file changed."""
    from acme_launch.run import summary as summary_lib
    files = tuple((path, os.stat(path).st_size)
                  for path in summary_lib.evaluation_files(self._run_dir))
    if files == self._evaluations_seen:
      return False
    self._evaluations_seen = files
    steps, score = self._next_boundary_score(read_synced(self._context.control))
    return steps > self._reported and score is not None

  def _takes_turns(self) -> bool:
    """Whether it takes a free slot for each turn (fewer than members)."""
    return self._context.freeze and not self._context.member_slots

  def _wait_for_slot(self) -> bool:
    """Whether it holds a slot, waiting a report's period for one."""
    if self._lock_fd < 0:
      taken = _take_slot(self._context, self._context.report_seconds)
      if taken is None:
        return False
      self._slot, self._lock_fd = taken
    return True

  def _waiting_result(self) -> Dict[str, Any]:
    """Nothing to report but that it waits for a slot (for Tune's PBT, at
    the boundary compared last: no comparison for it yet)."""
    return {'event': 'waiting', 'point': self._name,
            'segment_steps': read_synced(self._context.control),
            'segment_return': float('nan')}

  def _freeze(self, result: Dict[str, Any]) -> None:
    """At a boundary: its program stopped where it is, its slot given up
    when it takes turns."""
    self._frozen = freeze_lib.stop(self._popen.pid)
    self._frozen_slot = self._slot
    # The counter's progress file is written every second: the evaluation
    # that scored it may have counted more.
    progress = run_progress(self._run_dir)
    steps = max(int(progress.get('actor_steps', 0)),
                int(progress.get('eval_steps', 0)))
    result.update(frozen=time.time(), frozen_steps=steps)
    if self._takes_turns():
      os.close(self._lock_fd)
      self._lock_fd = -1
    self._log.write(f'acme-launch sweep: frozen at {steps:,} actor steps '
                    f'(boundary {result["segment_steps"]:,}) until the '
                    'population is compared there\n')
    self._log.flush()

  def _frozen_result(self) -> Dict[str, Any]:
    """Frozen until the population compared its boundary, then thawed on
    the slot it takes (a member that copies another stays frozen: Tune
    stops it). A stop of the sweep thaws it, and passes the signal on."""
    context = self._context
    deadline = time.time() + context.report_seconds
    while True:
      if read_stop(context.control):
        self._thaw()
        code = self._wait()
        return (self._boundary_result() if code is None else
                self._ended_result(code))
      if (read_synced(context.control) >= self._reported and
          staged_exploit(self._run_dir) is None and
          (not self._takes_turns() or self._wait_for_slot())):
        self._thaw()
        return {**self._boundary_result(), 'thawed': time.time(),
                'slot': self._slot.index, 'cores': list(self._slot.cores),
                'thawed_steps': int(run_progress(self._run_dir).get(
                    'actor_steps', 0))}
      if time.time() >= deadline:
        return self._boundary_result()
      time.sleep(0.2)

  def _thaw(self) -> None:
    """Its program running again, on its slot's cores."""
    pids, self._frozen = self._frozen, None
    if pids is None:
      return
    if self._slot is not self._frozen_slot:
      freeze_lib.move(pids, self._frozen_slot.cores, self._slot.cores)
    freeze_lib.cont(pids)
    self._log.write(f'acme-launch sweep: thawed ({describe_slot(self._slot)})'
                    '\n')
    self._log.flush()

  def _keep_on_slot(self) -> None:
    """A node its program restarts after a move pins itself to the cores
    planned for it, in the slot the program started on (another member's
    now): each report moves such threads to the slot it runs on."""
    if (self._launch_slot is not None and self._slot is not None and
        self._launch_slot.cores != self._slot.cores):
      freeze_lib.move(freeze_lib.tree(self._popen.pid),
                      self._launch_slot.cores, self._slot.cores)

  def cleanup(self) -> None:
    if self._frozen is not None:  # Stopped as a running program is.
      freeze_lib.cont(self._frozen)
      self._frozen = None
    super().cleanup()

  def save_checkpoint(self, checkpoint_dir: str) -> None:
    """The member's learner checkpoint: as its program left it at the end
    of its last segment, or, while its program runs (or is frozen: thawed
    for the save), a save made now. On a Ray cluster, its latest periodic
    save: the learner's host may not see a request, and this runs in
    Tune's driver, which a wait would hold up."""
    on_cluster = self._slot is not None and bool(self._slot.cluster)
    if (self._popen is not None and self._popen.poll() is None and
        not on_cluster):
      if self._frozen is not None:
        freeze_lib.cont(self._frozen)
        try:
          self._save_learner_now()
        finally:
          self._frozen = freeze_lib.stop(self._popen.pid)
      else:
        self._save_learner_now()
    learner = learner_checkpoints(self._run_dir)
    for attempt in range(3):
      if not os.path.isdir(learner):
        break
      target = os.path.join(checkpoint_dir, 'learner')
      try:
        shutil.copytree(learner, target)
        break
      except (shutil.Error, OSError):  # A periodic save replaced a file.
        shutil.rmtree(target, ignore_errors=True)
        if attempt == 2:
          raise
    layout.write_json_atomic(os.path.join(checkpoint_dir, 'member.json'), {
        'point': self._name, 'actor_steps': member_steps(self._run_dir),
        'values': self._values})

  def _save_learner_now(self) -> None:
    """Asks the running program's learner for a save and waits for it
    (layout.learner_save_request_path); after SAVE_WAIT_SECONDS, or if
    the program ends, its latest save is what is copied."""
    token = f'{self.trial_id}-{time.time():.6f}'
    layout.write_json_atomic(layout.learner_save_request_path(self._run_dir),
                             {'token': token})
    deadline = time.time() + SAVE_WAIT_SECONDS
    while time.time() < deadline and self._popen.poll() is None:
      saved = layout.read_json(layout.learner_saved_path(self._run_dir))
      if isinstance(saved, dict) and saved.get('token') == token:
        return
      time.sleep(0.1)
    why = ('its program ended first' if self._popen.poll() is not None
           else f'none within {SAVE_WAIT_SECONDS:.0f} s')
    self._log.write(f'acme-launch sweep: no learner save on request ({why});'
                    ' its latest is copied\n')
    self._log.flush()

  def load_checkpoint(self, checkpoint: str) -> None:
    """Nothing to do. The member's own checkpoint (Tune paused and resumes
    it): its run directory holds it. Another member's (an exploit, or the
    latest after one when Tune starts a failed trial again): the copy was
    staged in its run directory when the population decided it
    (stage_exploit) and is applied at its next start, which alone says
    what it copied; a retried start after that goes on from what the
    member learned since."""
    del checkpoint
