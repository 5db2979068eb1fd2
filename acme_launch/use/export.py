"""A run's policy taken out: `python -m acme_launch.export RUN_DIR OUT_DIR`.

OUT_DIR gets the learner checkpoint's actor parameters as numpy arrays
(params.npz), a manifest (agent, spaces, network config, observation
statistics, the learner step, the versions), the evaluation policy's
computation serialized by `jax.export` (what acme_launch/policy.py loads
with numpy and JAX only), a TF SavedModel (`serving_default`, batch
dimension free, made by jax2tf in the graph mode TF 2.8 loads: no
XlaCallModule, no XLA ops), its ONNX model (tf2onnx, run by onnxruntime),
and a README.md model card. The policy is the evaluator's (made in
agents/evaluation_policy.py), from the parameters restore.py reads, so all
the formats act as the run's evaluations did.

Everything is written into a temporary folder beside OUT_DIR, renamed to
OUT_DIR at the end: bad input or a failure leaves no half-written OUT_DIR,
and the run directory is only read.
"""

import dataclasses
import datetime
import glob
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from acme_launch import errors
from acme_launch import layout
from acme_launch import policy as policy_lib
from acme_launch.use import restore

SAVED_MODEL = 'saved_model'
ONNX = 'policy.onnx'
ONNX_OPSET = 13


@dataclasses.dataclass(frozen=True)
class Step:
  """The policy as one function of flat arrays: (params, observations[B])
  -> actions, or (params, observations, state) -> (actions, state)."""
  fn: Callable
  params: List[np.ndarray]
  state: List[np.ndarray]      # One environment's initial state (recurrent).
  observation: Any             # The observation's spec (one array).


def _step(policy, params) -> Step:
  import jax
  flat, treedef = jax.tree_util.tree_flatten(params)
  flat = [np.asarray(leaf) for leaf in flat]
  spec = policy.environment_spec.observations
  key = jax.random.PRNGKey(0)
  if not policy.recurrent:
    act = policy.batched_actions()
    # One observation at a time, vmapped: the batch stays free (symbolic)
    # without TFP 0.15's JAX distributions seeing a symbolic dimension.
    one = lambda p, o: act(p, key, o[None])[0]
    fn = lambda p, o: jax.vmap(one, in_axes=(None, 0))(treedef.unflatten(p), o)
    if _key_unused(lambda k, o: act(params, k, o[None])[0], spec):
      fn = _without_random_bits(fn)
    return Step(fn, flat, [], spec)
  core = policy.actor_core()
  if core is None:
    raise errors.LaunchError(
        f'config.agent {policy.config.agent} is recurrent but its adapter has '
        'no make_actor_core: its policy cannot be exported')
  state, state_def = jax.tree_util.tree_flatten(core.init(key))
  state = [np.asarray(leaf) for leaf in state]
  params = treedef.unflatten(flat)
  carried = _carried(core, params, state_def, state, spec.generate_value())
  unused = _unused_keys(core, params, state_def, state, carried, spec)
  carried = [i for i in carried if i not in unused]

  def one(p, observation, carry):
    leaves = list(state)
    for i, leaf in zip(carried, carry):
      leaves[i] = leaf
    action, new = core.select_action(p, observation,
                                     state_def.unflatten(leaves))
    new = jax.tree_util.tree_leaves(new)
    return action, [new[i] for i in carried]

  def fn(p, observations, carry):
    return jax.vmap(one, in_axes=(None, 0, 0))(treedef.unflatten(p),
                                               observations, carry)
  if unused:
    fn = _without_random_bits(fn)
  return Step(fn, flat, [state[i] for i in carried], spec)


def _carried(core, params, state_def, state, observation) -> List[int]:
  """The state's leaves a step changes: the ones it only passes on (R2D2's
  epsilon, fixed in an evaluation) stay constants of the exported step, so
  no format has an input that nothing reads (tf2onnx drops those)."""
  import jax

  def one(observation, *leaves):
    _, new = core.select_action(params, observation,
                                state_def.unflatten(list(leaves)))
    return jax.tree_util.tree_leaves(new)
  jaxpr = jax.make_jaxpr(one)(observation, *state).jaxpr
  return [i for i, out in enumerate(jaxpr.outvars)
          if out is not jaxpr.invars[1 + i]]


def _unused_keys(core, params, state_def, state, carried, spec,
                 trials: int = 8) -> List[int]:
  """The carried PRNG keys (uint32[2] leaves) that the actions do not
  depend on: the deterministic policy's (R2D2's greedy step, epsilon 0,
  still draws from its key). They stay constants of the exported step, so
  its state is what the policy remembers (R2D2: the LSTM's), with no key
  for the user to carry. Tried on `trials` observations with other keys:
  an agent whose evaluation samples (IMPALA) keeps its key in the state."""
  import jax
  keys = [i for i in carried
          if state[i].dtype == np.uint32 and state[i].shape == (2,)]
  if not keys:
    return []
  act = jax.jit(lambda observation, leaves: core.select_action(
      params, observation, state_def.unflatten(leaves))[0])
  rng = np.random.RandomState(0)
  for trial in range(trials):
    observation = _observation(spec, rng)
    other = list(state)
    for i in keys:
      other[i] = np.asarray(jax.random.PRNGKey(1000 + trial), np.uint32)
    if not np.array_equal(np.asarray(act(observation, state)),
                          np.asarray(act(observation, other))):
      return []
  return keys


def _observation(spec, rng):
  if np.issubdtype(spec.dtype, np.floating):
    return rng.randn(*spec.shape).astype(spec.dtype)
  return rng.randint(0, 2, spec.shape).astype(spec.dtype)


def _key_unused(act, spec, trials: int = 8) -> bool:
  """Whether `act(key, observation)` gives the same action whatever the
  key (a raw uint32[2]), on `trials` observations: the deterministic
  policy's, which may still draw (with zero noise, epsilon 0)."""
  import jax
  act = jax.jit(act)
  rng = np.random.RandomState(0)
  for trial in range(trials):
    observation = _observation(spec, rng)
    if not np.array_equal(
        np.asarray(act(jax.random.PRNGKey(0), observation)),
        np.asarray(act(jax.random.PRNGKey(1000 + trial), observation))):
      return False
  return True


def _without_random_bits(fn):
  """`fn` traced with its raw keys read as a PRNG that draws constants:
  for a step whose actions do not depend on its key (_key_unused), so
  that no format carries JAX's threefry computation: converted by jax2tf
  (no XLA) for TF 2.8, TD3's and D4PG's noise (a normal draw times 0)
  came out NaN in their SavedModels, and ONNX opset 13 has no bitwise
  operators. JAX reads a raw key
  with `jax._src.random.default_prng_impl()`, whose named choices are
  fixed (threefry2x32, rbg, unsafe_rbg): it is swapped while `fn` is
  traced, and only then."""
  import jax.numpy as jnp
  from jax._src import prng
  from jax._src import random as jax_random
  zeros = prng.PRNGImpl(
      key_shape=(2,),
      seed=lambda seed: jnp.zeros((2,), jnp.uint32),
      split=lambda key, shape: jnp.broadcast_to(key, (*shape, 2)),
      # Half the range: uniform draws of 0.5, normal draws of 0 (not the
      # ends of the range, whose inverse error function is infinite).
      random_bits=lambda key, bit_width, shape: jnp.full(
          shape, 1 << (bit_width - 1), jnp.dtype(f'uint{bit_width}')),
      fold_in=lambda key, data: key,
      name='acme_launch_zeros', tag='zeros')

  def traced(*args):
    default = jax_random.default_prng_impl
    jax_random.default_prng_impl = lambda: zeros
    try:
      return fn(*args)
    finally:
      jax_random.default_prng_impl = default
  return traced


def _structs(step: Step, batch):
  import jax
  shaped = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype)
  args = [[shaped(x.shape, x.dtype) for x in step.params],
          shaped((batch, *step.observation.shape), step.observation.dtype)]
  if step.state:
    args.append([shaped((batch, *x.shape), x.dtype) for x in step.state])
  return args


def jax_exported(step: Step) -> bytes:
  import jax
  from jax import export
  batch, = export.symbolic_shape('b')
  return export.export(jax.jit(step.fn))(*_structs(step, batch)).serialize()


def saved_model(step: Step, path: str):
  """The TF SavedModel of `step`, its parameters as variables; returns the
  serving function (tf2onnx converts it)."""
  import tensorflow as tf
  from jax.experimental import jax2tf
  module = tf.Module()
  module.params = [tf.Variable(x, trainable=False) for x in step.params]
  polymorphic = [None, '(b, ...)'] + ([['(b, ...)'] * len(step.state)]
                                      if step.state else [])
  converted = jax2tf.convert(step.fn, native_serialization=False,
                             enable_xla=False, polymorphic_shapes=polymorphic)
  specs = [tf.TensorSpec((None, *step.observation.shape),
                         tf.as_dtype(step.observation.dtype), 'observation')]
  specs += [tf.TensorSpec((None, *x.shape), tf.as_dtype(x.dtype), f'state_{i}')
            for i, x in enumerate(step.state)]

  @tf.function(autograph=False, input_signature=specs)
  def serve(observation, *state):
    if not step.state:
      return {'action': converted(module.params, observation)}
    action, state = converted(module.params, observation, list(state))
    return {'action': action,
            **{f'next_state_{i}': x for i, x in enumerate(state)}}
  module.serve = serve
  tf.saved_model.save(module, path, signatures={'serving_default': serve})
  return serve


def onnx_model(serve, path: str):
  """The ONNX model of the SavedModel's function (checked by _formats as
  onnxruntime runs it: tf2onnx can write a model whose operators its opset
  lacks, or that computes otherwise)."""
  import tf2onnx
  tf2onnx.convert.from_function(
      serve, input_signature=serve.input_signature, opset=ONNX_OPSET,
      output_path=path, custom_op_handlers={'SelectV2': (_as_where, [])})


def _as_where(ctx, node, name, args):
  """TF's SelectV2 as ONNX's Where, which broadcasts as it does. tf2onnx
  1.16.1 writes it as cond * x + (1 - cond) * y unless it sees a NaN
  constant among its inputs, and that is NaN wherever the branch not
  taken is NaN or infinite: `jnp.var`'s guard in a LayerNorm (TD3's and
  D4PG's torsos) made every action NaN."""
  del ctx, name, args
  node.type = 'Where'


def _formats(step: Step, tmp: str, echo) -> Dict[str, str]:
  """Each format written, or why not: 'ok' or the reason's one line."""
  _write_bytes(os.path.join(tmp, policy_lib.STEP), jax_exported(step))
  formats = {'jax_export': 'ok'}
  try:
    serve = saved_model(step, os.path.join(tmp, SAVED_MODEL))
    _check_actions(step, _saved_model_actions(os.path.join(tmp,
                                                           SAVED_MODEL)))
    formats['saved_model'] = 'ok'
  except Exception as e:  # jax2tf raises many types for an unconvertible op.
    formats['saved_model'] = formats['onnx'] = _why(e)
    shutil.rmtree(os.path.join(tmp, SAVED_MODEL), ignore_errors=True)
    _say(formats, echo)
    return formats
  try:
    onnx_model(serve, os.path.join(tmp, ONNX))
    _check_actions(step, _onnx_actions(os.path.join(tmp, ONNX)))
    formats['onnx'] = 'ok'
  except Exception as e:  # tf2onnx's converter raises many types.
    formats['onnx'] = _why(e)
    if os.path.exists(os.path.join(tmp, ONNX)):  # Not a model that loads.
      os.remove(os.path.join(tmp, ONNX))
  _say(formats, echo)
  return formats


def _say(formats: Dict[str, str], echo) -> None:
  for name, value in formats.items():
    if value != 'ok':
      echo(f'export: no {name} for this policy: {value}')


class ActionsDiffer(Exception):
  """A converted format acts otherwise than the policy's own step."""


def _check_actions(step: Step, act: Callable, batch: int = 3) -> None:
  """A written format's actions, `act(inputs)` with the inputs by name
  (observation, state_0, ...), against the JAX step's on a few
  observations: a conversion that runs but computes otherwise (as a
  Select written as arithmetic over a NaN did, before _as_where) is
  reported and not kept."""
  import jax
  rng = np.random.RandomState(0)
  observations = np.stack([_observation(step.observation, rng)
                           for _ in range(batch)])
  state = [np.repeat(x[None], batch, axis=0) for x in step.state]
  want = jax.jit(step.fn)(step.params, observations, *(
      [state] if step.state else []))
  want = np.asarray(want[0] if step.state else want)
  got = np.asarray(act({'observation': observations,
                        **{f'state_{i}': x for i, x in enumerate(state)}}))
  if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4,
                                                atol=1e-4):
    raise ActionsDiffer(
        'its actions differ from the policy\'s on the same observations '
        f'(e.g. {got.ravel()[:3].tolist()} for {want.ravel()[:3].tolist()})')


def _saved_model_actions(path: str) -> Callable:
  import tensorflow as tf
  serve = tf.saved_model.load(path).signatures['serving_default']
  return lambda inputs: serve(**inputs)['action']


def _onnx_actions(path: str) -> Callable:
  import onnxruntime
  session = onnxruntime.InferenceSession(path,
                                         providers=['CPUExecutionProvider'])
  return lambda inputs: session.run(['action'], inputs)[0]


def _why(e: Exception) -> str:
  return f'{type(e).__name__}: {" ".join(str(e).split())[:300]}'


def _write_bytes(path: str, data: bytes):
  with open(path, 'wb') as f:
    f.write(data)


def _versions() -> Dict[str, str]:
  from importlib import metadata
  names = ('jax', 'jaxlib', 'dm-haiku', 'numpy', 'tensorflow', 'dm-acme',
           'onnx', 'tf2onnx', 'onnxruntime')
  found = {}
  for name in names:
    try:
      found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      pass
  found['python'] = sys.version.split()[0]
  return found


def _evaluation(run_dir: str) -> Optional[Dict[str, Any]]:
  """The run's newest evaluation (evaluations/*.json), or its summary's."""
  paths = sorted(glob.glob(os.path.join(layout.evaluations_dir(run_dir),
                                        '*.json')))
  for path in reversed(paths):
    try:
      with open(path) as f:
        return {'path': path, **json.load(f)}
    except (OSError, ValueError):
      continue
  return None


def action_entry(spec, bounds) -> Dict[str, Any]:
  """The manifest's `action`: the policy's actions (shape, dtype, and
  `num_values` if discrete or `minimum`/`maximum` if not) and, where the
  task rescales them, its own bounds (`task_minimum`/`task_maximum`:
  policy.Policy.to_task maps onto them)."""
  entry = {'shape': list(spec.shape), 'dtype': np.dtype(spec.dtype).name}
  if hasattr(spec, 'num_values'):
    entry['num_values'] = int(spec.num_values)
    return entry
  if hasattr(spec, 'minimum'):
    entry['minimum'] = np.broadcast_to(spec.minimum, spec.shape).tolist()
    entry['maximum'] = np.broadcast_to(spec.maximum, spec.shape).tolist()
  if bounds is not None:
    entry['task_minimum'], entry['task_maximum'] = (
        np.asarray(b, np.float64).tolist() for b in bounds)
  return entry


def manifest(run, restored, step: Step, formats, command,
             action: Dict[str, Any]) -> Dict[str, Any]:
  stats = restored.observation_statistics
  return {
      'agent': run.config.agent,
      'env_name': run.config.env_name,
      'env_backend': run.config.get('env_backend'),
      'recurrent': bool(step.state),
      'observation': {'shape': list(step.observation.shape),
                      'dtype': np.dtype(step.observation.dtype).name},
      'action': action,
      'config': json.loads(run.config.to_json_best_effort()),
      'observation_statistics': None if stats is None else {
          k: np.asarray(v).tolist() for k, v in stats.items()},
      'learner_steps': restored.learner_steps,
      'checkpoint': restored.checkpoint,
      'run_dir': os.path.abspath(run.run_dir),
      'formats': formats,
      'versions': _versions(),
      'command': command,
      'exported': datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec='seconds'),
  }


def model_card(m: Dict[str, Any], evaluation) -> str:
  lines = [f'# {m["agent"]} on {m["env_name"]}', '',
           f'A policy trained by acme-launch: agent `{m["agent"]}` on '
           f'`{m["env_name"]}` (backend {m["env_backend"]}), taken from the '
           f'learner checkpoint `{os.path.basename(m["checkpoint"])}` of '
           f'`{m["run_dir"]}`' + (
               f' at {m["learner_steps"]} learner steps.'
               if m['learner_steps'] is not None
               else ' (its state does not count learner steps).'), '',
           f'Made by `{m["command"]}` on {m["exported"]}.', '']
  action = m.get('action') or {}
  if 'task_minimum' in action:
    bounds = ', '.join(f'[{low}, {high}]' for low, high in sorted(set(zip(
        action['task_minimum'], action['task_maximum']))))
    lines += ['## Actions', '',
              'The policy acts in [-1, 1]; the task takes its actions '
              f'clipped to that and rescaled to {bounds}, as in training: '
              '`act.to_task(act(observations))`.', '']
  lines += ['## Evaluation', '']
  if evaluation is None:
    lines.append('None yet: `python -m acme_launch.evaluate RUN_DIR` plays it.')
  else:
    iqm = evaluation.get('return_iqm')
    lines.append(f'{len(evaluation.get("returns", []))} episodes: mean return '
                 f'{evaluation.get("return_mean", float("nan")):.2f}' + (
                     f', IQM {iqm["value"]:.2f} (95% interval {iqm["low"]:.2f}'
                     f' to {iqm["high"]:.2f})' if iqm else '') +
                 f' ({evaluation["path"]}).')
    for video in evaluation.get('videos') or []:
      lines.append(f'Video: {video}')
  lines += ['', '## Files', '',
            '- `params.npz`: the actor parameters (numpy arrays `leaf_i`).',
            '- `manifest.json`: agent, spaces, config, observation statistics,'
            ' versions.',
            '- `policy.jax_export`: `acme_launch.policy.load(OUT_DIR)` runs it '
            '(numpy and JAX only).']
  for name, value in m['formats'].items():
    if name != 'jax_export':
      lines.append(f'- {name}: ' + ('written' if value == 'ok'
                                    else f'not made: {value}'))
  return '\n'.join(lines) + '\n'


def check_one_observation(spec, env_name: str) -> None:
  """LaunchError (one line) unless the observation is one array: every
  format takes one `observation` input (a dict's arrays would each need
  a named input, which no format here is given yet)."""
  import tree
  leaves = tree.flatten_with_path(spec.observations)
  if len(leaves) == 1 and not leaves[0][0]:
    return
  names = ', '.join('.'.join(map(str, path)) for path, _ in leaves)
  raise errors.LaunchError(
      f'cannot export a policy of {env_name}: its observations are '
      f'{len(leaves)} arrays ({names}) and the export takes one; concatenate '
      'them in the environment (e.g. Acme\'s '
      'wrappers.ConcatObservationWrapper) and train on that')


def _check_out(out_dir: str):
  if os.path.exists(out_dir) and (not os.path.isdir(out_dir)
                                  or os.listdir(out_dir)):
    raise errors.LaunchError(f'{out_dir} exists and is not an empty folder: '
                             'export into a new one')


def _leaves_npz(path: str, leaves: List[np.ndarray]):
  np.savez(path, **{f'leaf_{i}': x for i, x in enumerate(leaves)})


def export(run_dir: str, out_dir: str, checkpoint: str = '',
           command: str = '', echo=print) -> Dict[str, Any]:
  """Writes OUT_DIR; returns its manifest. LaunchError: one line, nothing
  written."""
  from acme.utils import loggers
  from acme_launch import agents
  from acme_launch.agents import evaluation_policy
  from acme_launch.use import evaluate
  _check_out(out_dir)
  if not os.path.isdir(run_dir):
    raise errors.LaunchError(f'{run_dir} is not a run directory (no such '
                             'folder)')
  run = restore.read_run(run_dir)
  spec, bounds = evaluate.spec_and_action_bounds(run.config)
  check_one_observation(spec, run.config.env_name)
  restored = restore.restore(run, checkpoint)
  policy = evaluation_policy.make(run.adapter, run.config, spec)
  builder = agents.call(
      run.adapter, 'make_builder', run.config,
      learner_logger_fn=lambda *a, **k: loggers.NoOpLogger(),
      environment_spec=spec) if policy.recurrent else None
  restore.check_fits(policy, restored.params, builder, restored.checkpoint)
  step = _step(policy, restored.params)
  parent = os.path.dirname(os.path.abspath(out_dir))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix='.export-', dir=parent)
  try:
    _leaves_npz(os.path.join(tmp, policy_lib.PARAMS), step.params)
    if step.state:
      _leaves_npz(os.path.join(tmp, policy_lib.STATE), step.state)
    formats = _formats(step, tmp, echo)
    m = manifest(run, restored, step, formats, command,
                 action_entry(spec.actions, bounds))
    with open(os.path.join(tmp, policy_lib.MANIFEST), 'w') as f:
      json.dump(m, f, indent=1)
    with open(os.path.join(tmp, 'README.md'), 'w') as f:
      f.write(model_card(m, _evaluation(run_dir)))
    _check_out(out_dir)
    if os.path.isdir(out_dir):
      os.rmdir(out_dir)
    os.rename(tmp, out_dir)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  echo(f'exported {run.config.agent} ({restored.checkpoint}) to {out_dir}')
  return m
