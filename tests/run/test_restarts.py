"""Restart policy: which node deaths restart and how often, and a restarted
node's fresh seed (runs that restart nodes: tests/e2e/run/test_restarts.py)."""

from acme_launch.plan import node_env
from acme_launch.program import seeds as seeds_lib
from acme_launch.run import restarts


def test_policy_restarts_actors_and_evaluators_up_to_the_limit_only():
  policy = restarts.RestartPolicy(max_restarts=2)
  assert [policy.on_death('actor/1').attempt for _ in range(2)] == [1, 2]
  assert not policy.on_death('actor/1').restart
  assert policy.on_death('evaluator/0').restart
  for node in ('learner/0', 'replay/0', 'counter/0'):
    assert not policy.on_death(node).restart
  assert policy.restarts == {'actor/1': 2, 'evaluator/0': 1}
  assert policy.total == 3


def test_the_node_under_pdb_is_never_restarted_after_its_post_mortem():
  policy = restarts.RestartPolicy(max_restarts=3, post_mortem_node='actor/0')
  decision = policy.on_death('actor/0')
  assert not decision.restart
  assert 'post-mortem debugger (--pdb)' in decision.reason
  assert policy.on_death('actor/1').restart  # The others as before.
  assert policy.restarts == {'actor/1': 1}


def test_a_restarted_node_gets_a_new_seed_for_each_restart(monkeypatch):
  monkeypatch.delenv(node_env.variable('restart'), raising=False)
  assert seeds_lib.seed_after_restarts(1234) == 1234
  seeds = set()
  for attempt in ('1', '2'):
    monkeypatch.setenv(node_env.variable('restart'), attempt)
    seeds.add(seeds_lib.seed_after_restarts(1234))
  assert len(seeds) == 2 and 1234 not in seeds
