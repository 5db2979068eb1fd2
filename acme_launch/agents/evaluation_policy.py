"""An agent's evaluation policy from its config: the one place it is made.

The evaluator node (program/build.py), `python -m acme_launch.evaluate`
and the policy export (acme_launch/use/) all act through the value made
here, so a run's evaluations, a later evaluation of its checkpoint and an
exported policy take the same actions from the same parameters: the
deterministic policy (`make_policy(..., evaluation=True)`), or with
`sample` the acting one (actor 0's, as the actors sample).

Parameters come from the learner (a variable client) in a run, and from
its checkpoint afterwards (`saved_actor_variables` of the saved state).
A feed-forward agent's policy is called on a batch of observations, one
call a step for every environment; a recurrent one (R2D2, IMPALA) keeps
state per environment, which its actor core (`make_actor_core`) or its
builder's actor carries.
"""

import dataclasses
from typing import Any, Callable

from acme_launch.agents import adapter as adapter_lib
from acme_launch.agents import loader


@dataclasses.dataclass(frozen=True)
class EvaluationPolicy:
  """An agent's networks and the policy its evaluations act with."""
  adapter: adapter_lib.Adapter
  config: Any
  environment_spec: Any
  networks: Any
  policy: Any        # make_policy's value: what builder.make_actor takes.
  sample: bool       # The acting (sampling) policy, not the evaluator's.

  @property
  def recurrent(self) -> bool:
    return self.adapter.recurrent

  def batched_actions(self) -> Callable:
    """(params, key, observations [B, ...]) -> actions [B, ...], the
    policy's extras (PPO's log-probs) dropped. Feed-forward agents only."""
    if self.recurrent:
      raise ValueError('a recurrent policy keeps state: use actor_core()')
    policy, extras = self.policy, self.adapter.policy_returns_extras
    return lambda params, key, observations: (
        policy(params, key, observations)[0] if extras
        else policy(params, key, observations))

  def actor_core(self):
    """A recurrent agent's Acme ActorCore (init(key) -> state;
    select_action(params, observation, state) -> (action, state)), or None
    where its adapter has no make_actor_core."""
    if self.adapter.make_actor_core is None:
      return None
    return self.adapter.make_actor_core(self.config, self.networks,
                                        self.policy)

  def make_actor(self, builder, random_key, variable_source):
    """The builder's actor over this policy (a recurrent agent's
    evaluations play with it, one episode at a time)."""
    return builder.make_actor(random_key, self.policy,
                              variable_source=variable_source)


def make(adapter: adapter_lib.Adapter, config, environment_spec,
         sample: bool = False) -> EvaluationPolicy:
  """Its evaluation policy; with `sample`, actor 0's acting policy. What
  the adapter raises is one line naming its module (LaunchError)."""
  networks = loader.call(adapter, 'make_networks', config, environment_spec)
  # Actor 0's policy where it differs by actor (DQN's Ape-X epsilons).
  index = ({'actor_index': 0} if sample and adapter_lib.takes_actor_index(
      adapter) else {})
  policy = loader.call(adapter, 'make_policy', config, networks,
                       environment_spec, evaluation=not sample, **index)
  return EvaluationPolicy(adapter, config, environment_spec, networks, policy,
                          sample)
