"""R2D2's policy and actor core: Acme's epsilon-greedy recurrent policy, and
the ActorCore `R2D2Builder.make_actor` runs, for actors stepping several
environments (program/recurrent_actor.py)."""

from acme_launch import compat  # JAX aliases; before acme
from acme import specs
from acme.agents.jax import actor_core as actor_core_lib
from acme.agents.jax import r2d2
from acme.agents.jax.r2d2 import actor as r2d2_actor
import jax
import ml_collections

from acme_launch.agents.r2d2 import builder


def make_policy(config: ml_collections.ConfigDict,
                networks: r2d2.R2D2Networks,
                environment_spec: specs.EnvironmentSpec, evaluation: bool):
  """Acme's epsilon-greedy recurrent policy, (params, key, observation,
  core_state, epsilon) -> (action, core_state); the evaluator's ignores the
  actor's epsilon and uses `config.r2d2.evaluation_epsilon`."""
  del environment_spec  # The networks carry what the policy needs.
  return r2d2.make_behavior_policy(networks, builder.r2d2_config(config),
                                   evaluation)


def make_actor_core(config: ml_collections.ConfigDict,
                    networks: r2d2.R2D2Networks, policy
                    ) -> actor_core_lib.ActorCore:
  """The ActorCore `R2D2Builder.make_actor` wraps in its actor: `policy`
  (make_policy's), the network's initial LSTM state, and an epsilon drawn
  per episode from `num_epsilons` Ape-X values. For actors stepping several
  environments (program/recurrent_actor.py)."""
  key = jax.random.PRNGKey(0)  # An LSTM's initial state: zeros, any key.
  initial_state = networks.initial_state.apply(
      networks.initial_state.init(key, 1), key, 1)
  return r2d2_actor.get_actor_core(policy, initial_state,
                                   config.r2d2.num_epsilons)
