"""R2D2's and IMPALA's learners run their LSTM over long sequences on the
CPU (agents/recurrent.py): jaxlib 0.4.30 dies compiling the written-out
unroll of a large LSTM over 34 steps or more."""

import collections
import os
import signal
import subprocess
import sys

import jax
import numpy as np

from acme_launch import compat  # JAX aliases; before acme
from acme_launch.agents.recurrent import unroll_lstm
import haiku as hk

from tests.conftest import REPO_ROOT

# Sums of N products of (32 x 512) transposed by (32 x 512), as the weight
# gradient of a written-out unroll is: each product is 2**24 flops, enough
# for XLA's oneDNN rewrite.
_SUM_OF_MATMULS = '''
import sys
import jax, jax.numpy as jnp
n = int(sys.argv[1])
def f(x, y):
  total = jnp.zeros((512, 512))
  for t in range(n):
    total = total + x[t].T @ y[t]
  return total
x = jnp.ones((n, 32, 512))
print(float(jax.jit(f)(x, x)[0, 0]))
'''


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run(
      [sys.executable, '-c', code, *args], cwd=REPO_ROOT, capture_output=True,
      text=True, timeout=600, check=False,
      env={**os.environ, 'JAX_PLATFORMS': 'cpu'})


def test_xla_dies_compiling_a_long_sum_of_large_matmuls():
  # Control: why the unroll is a loop. If this starts passing, a newer
  # jaxlib has fixed it.
  assert _python(_SUM_OF_MATMULS, '20').stdout.strip() == '640.0'
  result = _python(_SUM_OF_MATMULS, '40')
  assert result.returncode == -signal.SIGILL, result.stderr[-2000:]
  assert 'could not append a binary post-op' in result.stderr


def test_r2d2_atari_learner_steps_on_its_49_step_sequences():
  # r2d2_atari's learner as shipped (batch 32 of 49-step sequences, LSTM
  # 512) but a narrow torso: one SGD step, in a process of its own (a
  # compiler crash is a signal). Written out, its unroll died as above.
  result = _python('''
from acme_launch.testing import bench
learner = bench.load('learner')
config = learner._load_config(
    'r2d2_atari', ['--config.network.conv_channels=(4,4,4)'])
steps_per_second, steps = learner.alone(config, 0.1, warmup=1)
print(steps)
''')
  assert result.returncode == 0, result.stderr[-2000:]
  assert int(result.stdout.split()[-1]) >= 1


# What Reverb hands the learner for a stored hk.LSTMState: TF's own
# namedtuple of the same fields (a different type).
_DecodedLSTMState = collections.namedtuple('LSTMState', ['hidden', 'cell'])


def test_the_loop_gives_the_written_out_unroll_s_outputs():
  inputs = np.random.default_rng(0).normal(size=(7, 3, 5)).astype(np.float32)

  def both(x):
    core = hk.LSTM(4)
    state = core.initial_state(3)
    state = hk.LSTMState(hidden=state.hidden + 0.5, cell=state.cell - 0.5)
    return (unroll_lstm(core, x, _DecodedLSTMState(*state)),
            hk.static_unroll(core, x, state))

  net = hk.without_apply_rng(hk.transform(both))
  params = net.init(jax.random.PRNGKey(0), inputs)
  (looped, looped_state), (written, written_state) = net.apply(params, inputs)
  np.testing.assert_allclose(looped, written, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(looped_state.hidden, written_state.hidden,
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(looped_state.cell, written_state.cell,
                             rtol=1e-5, atol=1e-6)
