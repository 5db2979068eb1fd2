"""In a node process: its seed, with fresh ones after restarts.

A restarted actor or evaluator (run/restarts.py) gets its restart number in
its NodeEnv; its environments and policy then draw new seeds derived from
(seed, restart), so its seed stream continues instead of replaying the
episodes it played.
"""

import numpy as np

from acme_launch.plan import node_env


def seed_after_restarts(seed: int) -> int:
  """This node's seed, or after its k-th restart a new seed derived from
  (seed, k), so a restarted actor plays new episodes."""
  restart = node_env.NodeEnv.from_environ().restart
  if not restart:
    return seed
  sequence = np.random.SeedSequence([int(seed), 0x7E57A27, restart])
  return int(sequence.generate_state(1)[0] % 2**31)
