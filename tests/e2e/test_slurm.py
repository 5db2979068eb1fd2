"""Slurm: scripts/slurm/acme_launch.sbatch on a real two-node Slurm.

The Slurm (munged, slurmctld, two slurmd's from Debian's slurm-wlm) runs on
this machine, each node in a network and UTS namespace of its own
(tests/slurm_cluster.py). On a two-node job the template starts a Ray head
on the first node and a Ray worker on the other through `srun`, waits for
both, and runs launch.py with --launch_type=ray on the first, as a user's
`sbatch` would.
"""

import glob
import os

import pytest

from acme_launch.plan import slurm as slurm_lib
from tests import slurm_cluster
from tests.conftest import (REPO_ROOT, node_records, read_json, reached_budget,
                            user_env, wait_for)

# One namespace cluster at a time under pytest-xdist (tests/conftest.py).
pytestmark = pytest.mark.netns_cluster

TEMPLATE = os.path.join('scripts', 'slurm', 'acme_launch.sbatch')
BUDGET = 600
# Each Slurm node's Ray has the job's 2 CPUs there: the learner and the actor
# (1.5 each) cannot share one, so the run spans both; the rest are small.
RAY_CPUS = [f'--config.resources.{group}.ray_cpus={cpus}' for group, cpus in (
    ('replay', 0.1), ('counter', 0.1), ('learner', 1.5), ('actor', 1.5),
    ('evaluator', 0.1))]


@pytest.fixture(scope='module')
def slurm(tmp_path_factory):
  reason = slurm_cluster.why_not_available()
  if reason:
    if os.environ.get('CI'):
      pytest.fail(f'CI must run the Slurm tests: {reason}')
    pytest.skip(f'no Slurm here: {reason}')
  # No Ray token of the user's: the template makes one for the job.
  env = user_env({'RAY_USAGE_STATS_ENABLED': '0'})
  for name in ('RAY_AUTH_MODE', 'RAY_AUTH_TOKEN_PATH'):
    env.pop(name, None)
  cluster = slurm_cluster.SlurmCluster(nodes=2, cpus=2, env=env)
  # Ray's files in a short folder (socket paths have a length limit) that
  # each Slurm node has to itself, as a node-local /tmp; the job's temp
  # folder too (what a job killed hard leaves goes with the cluster).
  cluster.env['RAY_TMPDIR'] = cluster.env['TMPDIR'] = cluster.ray_tmp
  try:
    cluster.up()
    yield cluster
  finally:
    cluster.down()


def _sbatch(slurm, output: str, *flags: str):
  return slurm.run(['sbatch', '--wait', '--job-name=acme-launch', '--nodes=2',
                    '--cpus-per-task=2', f'--output={output}', TEMPLATE,
                    *flags], cwd=REPO_ROOT, timeout=400)


def test_the_template_runs_a_program_over_the_job_s_two_nodes(slurm, tmp_path):
  output = str(tmp_path / 'job.out')
  result = _sbatch(slurm, output, '--config=smoke',
                   f'--workdir={tmp_path}', '--run_name=slurm',
                   f'--config.max_actor_steps={BUDGET}', *RAY_CPUS)
  with open(output) as f:
    job_output = f.read()
  assert result.returncode == 0, (result.stderr + job_output[-4000:] +
                                  slurm.log_tails())
  assert f'2 hosts in the Ray cluster at {slurm.address}:6379' in job_output
  # The job's cluster asked for a token the template made, and removed.
  assert ('Ray token authentication with a new token for this job' in
          job_output), job_output[-2000:]
  assert not glob.glob(os.path.join(REPO_ROOT, '.acme-launch-ray-auth.*'))
  run_dir = str(tmp_path / 'slurm')
  summary = reached_budget(result, run_dir, BUDGET)
  config = read_json(os.path.join(run_dir, 'config.json'))
  assert config['launch_type'] == 'ray'
  assert summary['exit_reason'] == 'budget_reached'
  # The nodes ran on both Slurm nodes, each serving at its Slurm node's
  # address, through one Ray node per Slurm node.
  records = node_records(run_dir)
  assert len(records) == 5, sorted(records)
  ray_nodes = {}
  for node, record in records.items():
    assert record['host'] in slurm.node_names, (node, record['host'])
    assert record['bind_address'] == slurm.addresses[record['host']], node
    ray_nodes.setdefault(record['host'], set()).add(record['ray_node_id'])
  assert sorted(ray_nodes) == slurm.node_names, ray_nodes
  assert all(len(ids) == 1 for ids in ray_nodes.values()), ray_nodes
  assert len(set().union(*ray_nodes.values())) == 2, ray_nodes
  assert records['learner/0']['host'] != records['actor/0']['host']
  # The job ends: Slurm ends its Ray steps, and nothing is left queued.
  wait_for(lambda: slurm.run(['squeue', '-h']).stdout.strip() == '', 90,
           "the job's steps to end")
  # Ray and the launcher ended with it, on both nodes: only Slurm's own
  # daemons are left.
  def only_daemons():
    return all(set(slurm.process_names(node)) <=
               set(slurm_cluster.IDLE_PROCESSES) for node in slurm.node_names)
  wait_for(only_daemons, 60, 'only the Slurm daemons left, not ' + str(
      {node: slurm.process_names(node) for node in slurm.node_names}))


def test_a_dry_run_in_a_job_shows_what_the_job_holds(slurm, tmp_path):
  # salloc runs the dry run once, where it is called, in a two-node job.
  result = slurm.run(['salloc', '--job-name=plan', '--nodes=2',
                      '--ntasks-per-node=1', '--cpus-per-task=2',
                      os.path.join(REPO_ROOT, '.venv', 'bin', 'python'),
                      'launch.py', '--config=smoke', '--dry_run',
                      f'--workdir={tmp_path}'], cwd=REPO_ROOT, timeout=200)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
  assert ('Slurm job ' in result.stdout and '(plan, partition test' in
          result.stdout), result.stdout
  assert '2 nodes, 4 CPUs, 0 GPUs' in result.stdout
  for node in slurm.node_names:
    assert f'  {node}  2 CPUs, 0 GPUs' in result.stdout


def test_scontrol_s_view_of_a_job_becomes_an_allocation(slurm, monkeypatch):
  # The detail lines of `scontrol show job -d -o` on a two-node GPU job;
  # the node list expands through this Slurm's own scontrol.
  monkeypatch.setenv('SLURM_CONF', slurm.conf)
  text = ('JobId=42 JobName=ppo UserId=u(1) Partition=gpu TimeLimit=1-00:00:00 '
          'NumNodes=3 JOB_GRES=gpu:a100:3   Nodes=g[1-2] CPU_IDs=0-7,16-23 '
          'Mem=64G GRES=gpu:a100:1(IDX:0)   Nodes=g7 CPU_IDs=4 Mem=1000 '
          'GRES=gpu:2(IDX:0-1),shard:4 MinCPUsNode=1 Features=(null)')
  job = slurm_lib.parse_job(text)
  assert (job.job_id, job.job_name, job.partition, job.time_limit) == (
      '42', 'ppo', 'gpu', '1-00:00:00')
  assert job.nodes == (slurm_lib.NodeShare('g1', 16, 65536, 1),
                       slurm_lib.NodeShare('g2', 16, 65536, 1),
                       slurm_lib.NodeShare('g7', 1, 1000, 2))
  assert slurm_lib.format_allocation(job).splitlines()[0] == (
      'Slurm job 42 (ppo, partition gpu, time limit 1-00:00:00): 3 nodes, '
      '33 CPUs, 4 GPUs')
