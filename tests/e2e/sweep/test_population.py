"""--sweep_scheduler=pbt: a population of two on a task any learner improves
on at once (tests/bandit_env.py), taking turns on one slot: each member's
program runs through, frozen at the boundary (freeze.py) while the other
runs. The member whose learning rate is 0 cannot learn; at the comparison it
copies the other's learner checkpoint, and its next evaluations are the
other's, not its own. The launcher is killed (kill -9) once the comparison
is recorded and --resume finishes the population, the copy included; the
best member's schedule is then replayed as one program, and a member at its
budget, its summary lost, drops a copy staged for it. While the members
run, another user (`nobody`) tries every port the sweep's processes
listen on and joins its Ray as a driver: nothing answers."""

import json
import os
import shutil
import subprocess
import sys

import psutil

from acme_launch.sweep import slots, trials
from tests import bandit_env, other_user
from tests.conftest import (REPO_ROOT, alive, killed_on_exit, read_json,
                            run_launcher, start_launcher, wait_for)

LEARNER, FROZEN = 'ppo.learning_rate=0.003', 'ppo.learning_rate=0.0'
# The learner's return is 10 (the most) by about 1,300 actor steps. The
# member that copies is frozen as soon as its evaluator scores it at the
# boundary and stops to copy from there: about 700 actor steps past it
# (seen here, two tests at once on 2 cores). The budget is far past that,
# for a loaded machine.
INTERVAL, BUDGET = 5000, 10000

def _launches(sweep_dir: str) -> dict:
  try:
    record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  except (FileNotFoundError, json.JSONDecodeError):
    return {}
  return {p['name']: p['launches'] for p in record['points']}


def _programs_running(sweep_dir: str) -> bool:
  """Whether every member's program runs: its launcher has started nodes."""
  launches = _launches(sweep_dir)
  try:
    return bool(launches) and all(
        runs and len(psutil.Process(runs[-1]['pid']).children(
            recursive=True)) >= 3 for runs in launches.values())
  except psutil.Error:
    return False


def _gcs_address(launcher_pid: int) -> str:
  """HOST:PORT of the GCS of the sweep's own Ray instance."""
  for process in psutil.Process(launcher_pid).children(recursive=True):
    if process.name() == 'gcs_server':
      flags = dict(a.lstrip('-').split('=', 1) for a in process.cmdline()
                   if a.startswith('--') and '=' in a)
      return f'{flags["node-ip-address"]}:{flags["gcs_server_port"]}'
  raise AssertionError('no gcs_server under the sweep launcher')


def _attack(launcher_pid: int, base: str, sentinel: str) -> list:
  """As `nobody`, all at once against the running population: raw HTTP/2
  and Courier's calls (tests/intruder.py) to every port the sweep's
  processes listen on (its Ray, Tune's trial workers, the members'
  programs), each at the address it listens on, and a join of its Ray as
  a driver that runs a task (tests/ray_intruder.py). The started
  processes."""
  by_host = {}
  for ip, port in other_user.listeners(launcher_pid):
    ip = ip.replace('::ffff:', '')
    by_host.setdefault('127.0.0.1' if ip in ('0.0.0.0', '::') else ip,
                       set()).add(port)
  commands = [[sys.executable, '-m', 'tests.intruder', f'--host={host}',
               '--ports=' + ','.join(map(str, sorted(ports))),
               f'--sentinel={sentinel}'] for host, ports in by_host.items()]
  commands.append([sys.executable, '-m', 'tests.ray_intruder',
                   f'--address={_gcs_address(launcher_pid)}',
                   f'--sentinel={sentinel}'])
  env = other_user.environment(other_user.home_of(other_user.NOBODY, base))
  return [subprocess.Popen(other_user.command(other_user.NOBODY, argv, base),
                           cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
          for argv in commands]


def _attack_found(attempts: list) -> list:
  found = []
  for attempt in attempts:
    stdout, stderr = attempt.communicate(timeout=120)
    assert attempt.returncode == 0, stderr[-3000:]
    found.append(json.loads(stdout.strip().splitlines()[-1]))
  return found


def _exploits(sweep_dir: str) -> list:
  try:
    record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  except (FileNotFoundError, json.JSONDecodeError):
    return []
  return record.get('population', {}).get('exploits', [])


def test_the_member_that_cannot_learn_copies_the_learner_and_scores_as_it(
    workdir, request):
  sweep_dir = os.path.join(workdir, 'pbt')
  launcher = start_launcher(
      *bandit_env.SWEEP_FLAGS, '--max_concurrent=1',
      '--sweep_scheduler=pbt', f'--pbt_interval_steps={INTERVAL}',
      f'--config.max_actor_steps={BUDGET}', f'--workdir={workdir}',
      '--run_name=pbt')
  attacks = []
  with killed_on_exit(launcher):
    if not other_user.why_not():
      # Another user, once both members' programs run (one frozen).
      wait_for(lambda: _programs_running(sweep_dir), 300,
               'both first programs')
      base = other_user.shared_folder()
      request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
      sentinel = os.path.join(base, 'task-of-nobody')
      attacks = _attack(launcher.pid, base, sentinel)
    # Killed (kill -9) once the comparison is recorded and the member that
    # copies has stopped its program (its own steps saved, as Ctrl-C saves
    # them): its copy is staged in its run directory, and, most often, its
    # program has not started again from it yet.
    wait_for(lambda: _exploits(sweep_dir), 420, 'the comparison')
    stopping = _launches(sweep_dir)[FROZEN][0]['pid']
    wait_for(lambda: not alive([stopping]), 120,
             'the copying member\'s program to stop')
    launchers = [runs[-1]['pid'] for runs in _launches(sweep_dir).values()]
    launcher.kill()
    stdout, _ = launcher.communicate(timeout=60)
  # Ray's processes, the trials and the child launchers die with it.
  wait_for(lambda: not alive(launchers), 30, 'child launchers to die')
  assert ('2 to run, 1 at once, population-based training (compared at '
          f'{INTERVAL:,} actor steps; the worst 25% copy the best 25% and perturb '
          'ppo.learning_rate; the members take turns on the slots, each '
          'frozen at a boundary and thawed on a free slot after the '
          'comparison; started again only to copy)' in stdout)
  # One slot: the second member's program started once the first's was
  # frozen at the boundary, its actor steps past it.
  entries = {p['name']: p for p in read_json(
      os.path.join(sweep_dir, 'sweep.json'))['points']}
  first, second = sorted((entries[n]['launches'][0] for n in entries),
                         key=lambda l: l['started'])
  [frozen_at, *_] = first['frozen']
  assert frozen_at['boundary'] == INTERVAL and frozen_at['actor_steps'] >= INTERVAL
  assert second['started'] >= frozen_at['at']
  if attacks:
    *probes, join = _attack_found(attacks)
    assert probes and all(p['uid'] == other_user.NOBODY for p in probes)
    assert all(not answer['raw'] for p in probes
               for answer in p['ports'].values()), probes
    assert join['uid'] == other_user.NOBODY
    assert not join['joined'] and not join['task_ran'], join
    assert not os.path.exists(sentinel)
  # --resume: each member goes on from its own run directory, none from 0;
  # the copy decided before the kill is made.
  result = run_launcher(f'--resume={sweep_dir}', timeout=420)
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]

  record = read_json(os.path.join(sweep_dir, 'sweep.json'))
  entries = {p['name']: p for p in record['points']}
  for name in (LEARNER, FROZEN):
    launches = entries[name]['launches']
    # One program through to the budget, but where it stopped: the kill,
    # the copy.
    assert launches[0]['from_steps'] == 0 and not launches[0]['resumed']
    assert all(l['resumed'] and l['from_steps'] > 0 for l in launches[1:])
    assert all(l['until'] == BUDGET and 'segment_end' not in l
               for l in launches)
    assert launches[-1]['exit_reason'] == 'budget_reached'
    [segment] = entries[name]['segments']
    assert segment['actor_steps'] == INTERVAL
  assert all(l['copied'] is None for l in entries[LEARNER]['launches'])
  learned = entries[LEARNER]['segments'][0]['return']
  frozen = entries[FROZEN]['segments'][0]['return']
  assert learned > 5.0 and abs(frozen) < 2.0, (learned, frozen)

  # The comparison: the frozen member copied the learner, the learner kept
  # its own.
  [exploit] = record['population']['exploits']
  assert (exploit['member'], exploit['copied']) == (FROZEN, LEARNER)
  assert exploit['actor_steps'] == INTERVAL
  assert exploit['copied_steps'] >= INTERVAL
  assert (exploit['member_return'], exploit['copied_return']) == (frozen,
                                                                  learned)
  assert exploit['before'] == {'ppo.learning_rate': '0.0'}
  assert exploit['after']['ppo.learning_rate'] in ('0.0', '0.003')
  # Made once, by the first start after the decision (before the kill or
  # after the resume), with the values it was given; the staged copy is
  # gone.
  launches = entries[FROZEN]['launches']
  [copying] = [l for l in launches if l['copied']]
  assert copying is launches[1] if len(launches) == 2 else copying in (
      launches[1], launches[2])
  assert copying['copied'] == {'point': LEARNER,
                               'actor_steps': exploit['copied_steps'],
                               'at': copying['copied']['at']}
  assert all(l['values'] == exploit['after']
             for l in launches[launches.index(copying):])
  assert not os.path.exists(os.path.join(sweep_dir, FROZEN, 'exploit'))
  # What it copied: the learner as it was at the comparison, saved on the
  # sweep's request while its program ran.
  saved = read_json(os.path.join(sweep_dir, LEARNER, 'nodes',
                                 'learner_saved.json'))
  assert saved['token'] and saved['checkpoint']
  assert (f'at {INTERVAL:,} actor steps {FROZEN} (return {frozen:.1f}) copies the '
          f'learner of {LEARNER} (return {learned:.1f})') in stdout
  # It ran on with the values it was given.
  config = read_json(os.path.join(sweep_dir, FROZEN, 'config.json'))['config']
  assert str(config['ppo']['learning_rate']) == exploit['after'][
      'ppo.learning_rate']

  # Its evaluations after the copy are the learner's (about 10), not its
  # own (about 0); its actor steps went on from its own counter.
  summary = read_json(os.path.join(sweep_dir, FROZEN, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['final_eval_return_mean'] > 5.0
  assert INTERVAL <= summary['restored_actor_steps'] < BUDGET
  assert summary['actor_steps'] >= BUDGET

  table = read_json(os.path.join(sweep_dir, 'sweep_summary.json'))
  assert table['population']['exploits'] == 1
  assert table['failed'] == []
  rows = {r['point']: r for r in table['points']}
  assert rows[FROZEN]['copied'] == [[INTERVAL, LEARNER]]
  assert 'population of 2: 1 exploits' in result.stdout

  plot = subprocess.run([sys.executable, '-m', 'acme_launch.plot', sweep_dir],
                        cwd=REPO_ROOT, capture_output=True, text=True,
                        check=False)
  assert plot.returncode == 0, plot.stderr
  with open(os.path.join(sweep_dir, 'plots', 'eval_return.png'), 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'

  # Done: a resume runs nothing.
  again = run_launcher(f'--resume={sweep_dir}')
  assert again.returncode == 0, again.stderr
  assert '0 to run' in again.stdout

  # The best member's schedule as one program from scratch: the frozen
  # member's learner was the learner's until the copy.
  best = table['population']['best']
  replay = subprocess.run(
      [sys.executable, '-m', 'acme_launch.replay', sweep_dir],
      cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=300)
  assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-2000:]
  assert f'the schedule of {best}:' in replay.stdout
  if best == FROZEN:
    assert (f'actor steps 0 to {exploit["copied_steps"]:,}: '
            'ppo.learning_rate=0.003' in replay.stdout), replay.stdout
  run_dir = os.path.join(sweep_dir, 'replays', best)
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= BUDGET
  assert summary['final_eval_return_mean'] > 5.0
  # Its last segment ran with the values the member ended with.
  replayed = read_json(os.path.join(run_dir, 'config.json'))['config']
  ended = read_json(os.path.join(sweep_dir, best, 'config.json'))['config']
  assert replayed['ppo']['learning_rate'] == ended['ppo']['learning_rate']
  # Not a population: one line, exit 2.
  refused = subprocess.run(
      [sys.executable, '-m', 'acme_launch.replay', run_dir],
      cwd=REPO_ROOT, capture_output=True, text=True, check=False)
  assert refused.returncode == 2
  assert refused.stderr.startswith('acme-launch replay: error:')

  # A member whose program reached its budget before the comparison
  # stopped it to copy (members run through without waiting on a Ray
  # cluster), its launcher killed before its summary: its trial drops the
  # staged copy and starts it again, with its own values; its launch finds
  # nothing to do and says it reached the budget. The learner as member,
  # its trial run here as Tune's worker runs it.
  run_dir = os.path.join(sweep_dir, LEARNER)
  own = sorted(os.listdir(trials.learner_checkpoints(run_dir)))
  os.remove(os.path.join(run_dir, 'summary.json'))
  trials.stage_exploit(run_dir, os.path.join(sweep_dir, FROZEN, 'checkpoints'),
                       FROZEN, INTERVAL, {'ppo.learning_rate': '0.0'},
                       {'ppo.learning_rate': '0.003'})
  control = os.path.join(workdir, 'control')
  os.makedirs(control)
  trial = _Trial()
  trial.setup({'point': LEARNER, 'values': {'ppo.learning_rate': '0.0'}},
              trials.TrialContext(
                  sweep_dir=sweep_dir, control=control, cwd=REPO_ROOT,
                  env=dict(os.environ), slots=(slots.Slot(0, (0,), ()),),
                  argv={LEARNER: tuple(
                      a for a in record['base_argv']
                      if not a.startswith('--config.max_actor_steps'))},
                  interval_steps=INTERVAL, budget={LEARNER: BUDGET}, through=True,
                  member_slots={LEARNER: 0}))
  started = trial.step()
  assert started['exploit_dropped'] and started['copied'] is None
  assert started['values'] == {'ppo.learning_rate': '0.003'}
  ended = wait_for(lambda: (lambda r: r.get('done') and r)(trial.step()), 120,
                   'the relaunch to end')
  assert (ended['exit_code'], ended['exit_reason']) == (0, 'budget_reached')
  summary = read_json(os.path.join(run_dir, 'summary.json'))
  assert summary['exit_reason'] == 'budget_reached'
  assert summary['actor_steps'] >= BUDGET
  assert sorted(os.listdir(trials.learner_checkpoints(run_dir))) == own
  assert not os.path.exists(trials.exploit_dir(run_dir))
  with open(os.path.join(sweep_dir, 'logs', LEARNER + '.log')) as f:
    command, output = f.read().rsplit('acme-launch sweep: ', 1)[1].split(
        '\n', 1)
  assert '--config.ppo.learning_rate=0.003' in command, command
  assert 'nothing to do' in output, output


class _Trial(trials.MemberTrial):
  """A member's trial run in this process: its setup and steps as Tune's
  worker calls them."""
  trial_id = 'dropped'

  def __init__(self):  # Tune's own wants its trial info; setup() is called.
    pass
