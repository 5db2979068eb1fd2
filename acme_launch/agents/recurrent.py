"""The LSTM unroll that R2D2's and IMPALA's networks share.

Their learners run the LSTM over whole sequences (`[T, B, D]` embeddings).
`hk.dynamic_unroll` does that in one XLA loop; `hk.static_unroll`, what
Acme's own R2D2 network uses, writes out every step. On the CPU the loop is
faster and compiles sooner (`bench/learner.py`'s learner alone, a 2-core
x86-64 VM, 2026-11-26: `r2d2_minatar` 14 SGD steps/s against 8,
`impala_minatar` 22 against 14). Written out, the weight gradient of the
LSTM is a sum of one large matmul per step, and with 34 steps or more
jaxlib 0.4.30's CPU compiler dies with SIGILL while fusing that sum into
oneDNN calls ("could not append a binary post-op"): `r2d2_atari`'s 49-step
sequences did (tests/agents/test_recurrent.py).
"""

import haiku as hk


def unroll_lstm(core: hk.LSTM, inputs, state):
  """(outputs, final state) of `core` over `inputs` `[T, B, ...]` (or
  `[T, ...]`) from `state`, in a loop over T."""
  # The learner's stored states come back from Reverb as TF's namedtuple of
  # the same fields; the loop's carry must keep one type.
  state = hk.LSTMState(hidden=state.hidden, cell=state.cell)
  return hk.dynamic_unroll(core, inputs, state)
