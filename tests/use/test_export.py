"""acme_launch.use.export and acme_launch.policy: a learner checkpoint
saved by the run's own checkpointer (as tests/use/test_evaluate.py makes
it), exported, and the loader's, the SavedModel's and the ONNX model's
actions compared with the evaluator's policy (agents/evaluation_policy.py)
on the same observations, for every shipped agent, feed-forward and
recurrent (its state carried explicitly). Bad input: one line, exit 2, no
OUT_DIR."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from acme_launch import export as export_cli
from acme_launch import policy as policy_lib
from acme_launch.agents import evaluation_policy
from acme_launch.use import evaluate
from acme_launch.use import export
from acme_launch.use import restore
from tests.use.test_evaluate import _run_dir
from tests.use.test_restore import EXAMPLES

BATCH, STEPS = 3, 4


def _observations(spec, seed):
  rng = np.random.RandomState(seed)
  shape = (BATCH, *spec.shape)
  if np.issubdtype(spec.dtype, np.floating):
    return rng.randn(*shape).astype(spec.dtype)
  return rng.randint(0, 2, shape).astype(spec.dtype)


def _evaluator(run_dir):
  run = restore.read_run(run_dir)
  restored = restore.restore(run)
  policy = evaluation_policy.make(run.adapter, run.config,
                                  evaluate._spec(run.config))
  return policy, restored.params


def _onnx(out_dir):
  import onnxruntime
  return onnxruntime.InferenceSession(
      os.path.join(out_dir, export.ONNX), providers=['CPUExecutionProvider'])


# Every shipped agent, its networks made tiny (the formats' work grows with
# them, what is compared does not): feed-forward PPO (its observation
# statistics in its parameters), SAC, TD3, D4PG and DQN; recurrent R2D2
# (greedy: its key held constant, its state the LSTM's) and IMPALA (which
# samples: its key carried in its state).
AGENTS = {
    'smoke': {},
    'sac_mujoco': {'network.hidden_layers': (8,)},
    'td3_mujoco': {'network.hidden_layers': (8,)},
    'd4pg_mujoco': {'network.policy_layers': (8,),
                    'network.critic_layers': (8,)},
    'dqn_cartpole': {'network.hidden_layers': (8,)},
    'r2d2_minatar': {'network.lstm_size': 8, 'network.head_hidden_layers': (8,)},
    'impala_minatar': {'network.lstm_size': 8},
}


# Formats not made, and why, as the export says: IMPALA samples, and its
# ONNX model's random draws need bitwise operators that ONNX opset 13
# lacks.
NOT_MADE = {'impala_minatar': {'onnx': 'BitwiseOr'}}


@pytest.mark.parametrize('config_name', sorted(AGENTS))
def test_every_format_acts_as_the_evaluator(tmp_path, monkeypatch,
                                            config_name):
  import tensorflow as tf
  monkeypatch.syspath_prepend(EXAMPLES)
  run_dir = _run_dir(tmp_path, config_name, AGENTS[config_name])
  out_dir = str(tmp_path / 'policy')
  if config_name == 'smoke':  # The card gives the run's evaluation.
    evaluate.evaluate(evaluate.Request(run_dir, episodes=10), lambda *a: None)
  said = []
  m = export.export(run_dir, out_dir, command='test', echo=said.append)
  not_made = NOT_MADE.get(config_name, {})
  assert m['formats']['jax_export'] == 'ok'
  for name in ('saved_model', 'onnx'):
    if name in not_made:  # Said, with why, and no file of it left.
      assert not_made[name] in m['formats'][name]
      assert f'export: no {name} for this policy: ' in '\n'.join(said)
    else:
      assert m['formats'][name] == 'ok'
  assert os.path.exists(os.path.join(out_dir, export.ONNX)) == (
      'onnx' not in not_made)
  assert os.path.exists(os.path.join(out_dir, export.SAVED_MODEL)) == (
      'saved_model' not in not_made)
  card = open(os.path.join(out_dir, 'README.md')).read()
  assert ('onnx: written' in card) == ('onnx' not in not_made)
  assert ('10 episodes: mean return' in card and 'IQM' in card) == (
      config_name == 'smoke')
  policy, params = _evaluator(run_dir)
  loaded = policy_lib.load(out_dir)
  served = (tf.saved_model.load(os.path.join(out_dir, export.SAVED_MODEL)
                                ).signatures['serving_default']
            if 'saved_model' not in not_made else None)
  onnx = _onnx(out_dir) if 'onnx' not in not_made else None
  spec = policy.environment_spec.observations
  check = (np.testing.assert_array_equal if np.issubdtype(
      policy.environment_spec.actions.dtype, np.integer) else
           lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5,
                                                        atol=1e-5))
  if not policy.recurrent:
    act = jax.jit(policy.batched_actions())
    for seed in range(STEPS):
      obs = _observations(spec, seed)
      want = np.asarray(act(params, jax.random.PRNGKey(0), obs))
      check(loaded(obs), want)
      if served:
        check(served(observation=obs)['action'], want)
      if onnx:
        check(onnx.run(['action'], {'observation': obs})[0], want)
    return
  core = policy.actor_core()
  select = jax.jit(lambda o, s: core.select_action(params, o, s))
  states = [core.init(jax.random.PRNGKey(0)) for _ in range(BATCH)]
  mine = tf_state = onnx_state = loaded.initial_state(BATCH)
  names = [f'state_{i}' for i in range(len(mine))]
  for seed in range(STEPS):
    obs = _observations(spec, seed)
    want = []
    for i in range(BATCH):
      action, states[i] = select(obs[i], states[i])
      want.append(np.asarray(action))
    want = np.stack(want)
    actions, mine = loaded(obs, mine)
    check(actions, want)
    out = served(observation=obs, **dict(zip(names, tf_state)))
    check(out['action'], want)
    tf_state = [out[f'next_{name}'].numpy() for name in names]
    if onnx:
      got = onnx.run(['action'] + [f'next_{name}' for name in names],
                     {'observation': obs, **dict(zip(names, onnx_state))})
      check(got[0], want)
      onnx_state = got[1:]
  # R2D2's greedy step does not read its key: its state is the LSTM's.
  if config_name == 'r2d2_minatar':
    assert all(leaf.dtype == np.float32 for leaf in loaded.state)


def test_the_loader_imports_neither_tensorflow_nor_the_launcher():
  code = ('import sys, acme_launch.policy; heavy = [m for m in sys.modules '
          'if m.split(".")[0] in ("tensorflow", "acme", "launchpad", "reverb",'
          ' "haiku", "onnx") or m.startswith("acme_launch.")'
          ' and m not in ("acme_launch.policy", "acme_launch.paths")]; '
          'print(heavy); sys.exit(bool(heavy))')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True)
  assert result.returncode == 0, result.stdout + result.stderr


def test_bad_input_is_one_line_and_leaves_no_out_dir(tmp_path, capsys):
  full = tmp_path / 'full'
  full.mkdir()
  (full / 'x').write_text('mine')
  not_a_run = tmp_path / 'nothing'
  not_a_run.mkdir()
  cases = [([str(not_a_run), str(tmp_path / 'a')], 'is not a run directory'),
           ([str(not_a_run), str(full)], 'is not an empty folder')]
  for argv, words in cases:
    assert export_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count('\n') == 1
  assert not (tmp_path / 'a').exists()
  assert (full / 'x').read_text() == 'mine'
  assert [p.name for p in tmp_path.iterdir() if p.name.startswith('.')] == []


def test_a_checkpoint_cut_short_is_one_line_and_no_out_dir(tmp_path, capsys):
  run_dir = _run_dir(tmp_path, 'smoke')
  directory = os.path.join(run_dir, 'checkpoints', 'learner')
  data = max((os.path.join(directory, n) for n in os.listdir(directory)
              if '.data-' in n), key=os.path.getsize)
  with open(data, 'r+b') as f:
    f.truncate(os.path.getsize(data) // 2)
  out_dir = tmp_path / 'policy'
  assert export_cli.main([run_dir, str(out_dir)]) == 2
  err = capsys.readouterr().err
  assert 'does not read' in err and err.count('\n') == 1
  assert not out_dir.exists()
  assert [p.name for p in tmp_path.iterdir() if p.name.startswith('.')] == []


def test_dict_observations_are_one_line_naming_the_limit(tmp_path, capsys):
  run_dir = _run_dir(tmp_path, 'smoke')
  path = os.path.join(run_dir, 'config.json')
  with open(path) as f:
    saved = json.load(f)
  saved['config']['env_name'] = 'tests.use.dict_env:make'
  with open(path, 'w') as f:
    json.dump(saved, f)
  out_dir = tmp_path / 'policy'
  assert export_cli.main([run_dir, str(out_dir)]) == 2
  err = capsys.readouterr().err
  assert err.count('\n') == 1, err
  assert ('its observations are 2 arrays (position, velocity) and the '
          'export takes one') in err
  assert not out_dir.exists()
  assert [p.name for p in tmp_path.iterdir() if p.name.startswith('.')] == []


def test_the_manifest_gives_the_actions_and_the_loader_maps_them_to_the_task(
    tmp_path):
  # SAC on Pendulum-v1, whose torque is in [-2, 2]: the agent acts in
  # [-1, 1] and the environment it trained in clipped and rescaled that
  # (envs/factory.py); a user stepping the task itself needs the same.
  run_dir = _run_dir(tmp_path, 'sac_mujoco', {
      'network.hidden_layers': (8,), 'env_name': 'Pendulum-v1'})
  out_dir = str(tmp_path / 'policy')
  m = export.export(run_dir, out_dir, command='test', echo=lambda *a: None)
  assert m['action'] == {'shape': [1], 'dtype': 'float32', 'minimum': [-1.0],
                         'maximum': [1.0], 'task_minimum': [-2.0],
                         'task_maximum': [2.0]}
  loaded = policy_lib.load(out_dir)
  np.testing.assert_allclose(
      loaded.to_task(np.array([[-1.5], [-0.5], [0.25], [3.0]], np.float32)),
      [[-2.0], [-1.0], [0.5], [2.0]])
  card = open(os.path.join(out_dir, 'README.md')).read()
  assert 'to_task' in card and '[-2.0, 2.0]' in card
  # Discrete actions reach the task as the policy gives them.
  run_dir = _run_dir(tmp_path / 'dqn', 'dqn_cartpole',
                     {'network.hidden_layers': (8,)})
  m = export.export(run_dir, str(tmp_path / 'dqn_policy'), command='test',
                    echo=lambda *a: None)
  assert m['action'] == {'shape': [], 'dtype': 'int32', 'num_values': 2}
  loaded = policy_lib.load(str(tmp_path / 'dqn_policy'))
  np.testing.assert_array_equal(loaded.to_task(np.array([1, 0])), [1, 0])


@pytest.mark.parametrize('backend', ['gym', 'envpool'])
def test_the_task_action_bounds_are_read_from_either_backend(backend):
  from acme_launch import envs as environments
  environment = environments.make_environment('Humanoid-v4', 0,
                                               backend=backend)
  try:
    low, high = environments.task_action_bounds(environment)
  finally:
    environment.close()
  np.testing.assert_allclose(low, np.full(17, -0.4))
  np.testing.assert_allclose(high, np.full(17, 0.4))
  assert environment.action_spec().minimum.min() == -1.0
