"""Resource planner: plans for injected GPU inventories, bad input, node env."""

import os
import textwrap

from absl import flags
from ml_collections import config_flags
import pytest

from acme_launch import errors
from acme_launch.plan import gpu_inventory
from acme_launch.plan import node_env
from acme_launch.plan import resources
from acme_launch.plan import specs
from acme_launch.plan import table

from tests.conftest import REPO_ROOT
INVENTORIES = os.path.join(REPO_ROOT, 'tests', 'inventories')
NODES = [('replay', 0), ('counter', 0), ('learner', 0), ('actor', 0),
         ('actor', 1), ('evaluator', 0)]


def inventory(name):
  return gpu_inventory.read_inventory(os.path.join(INVENTORIES, name + '.json'))


def plan(inventory_name=None, nodes=NODES, host_cores=None, agent='',
         **settings):
  """A plan for the default config with `group__field=value` settings."""
  config = specs.default_resources_config()
  for key, value in settings.items():
    if '__' in key:
      group, field = key.split('__')
      config[group][field] = value
    else:
      config[key] = value
  gpus = inventory(inventory_name) if inventory_name else ()
  return resources.plan_resources(nodes, config, gpus, host_cores, agent)


def test_shipped_inventories_read():
  assert [g.name for g in inventory('a100x2_t4')] == [
      'NVIDIA A100-SXM4-80GB', 'Tesla T4', 'NVIDIA A100-SXM4-80GB']
  assert [g.memory_mb for g in inventory('rtx3080_3080ti')] == [10240, 12288]
  assert [g.index for g in inventory('h100x8')] == list(range(8))


def test_learner_gets_one_a100_not_the_t4():
  p = plan('a100x2_t4')
  assert p.placement('learner/0').gpus == (0,)
  assert p.placement('learner/0').env['CUDA_VISIBLE_DEVICES'] == '0'
  assert p.placement('learner/0').env['JAX_PLATFORMS'] == 'cuda,cpu'
  for node in ('replay/0', 'counter/0', 'actor/0', 'actor/1', 'evaluator/0'):
    assert p.placement(node).gpus == ()
    assert p.placement(node).env['CUDA_VISIBLE_DEVICES'] == ''
    assert p.placement(node).env['JAX_PLATFORMS'] == 'cpu'


def test_3080_and_3080ti_learner_gets_one_gpu_the_larger():
  p = plan('rtx3080_3080ti')
  assert p.placement('learner/0').gpus == (1,)


def test_every_shipped_learner_gets_one_h100_and_seven_stay_idle():
  from acme_launch import agents
  for agent in agents.SHIPPED:  # The default num_devices, 1: every agent's.
    assert agents.load(agent).uses_devices(1), agent
  p = plan('h100x8')
  assert p.placement('learner/0').gpus == (0,)
  assert [g.index for g in p.idle_gpus] == list(range(1, 8))
  text = table.format_plan(p)
  assert 'idle GPUs: 1, 2, 3, 4, 5, 6, 7 (NVIDIA H100' in text
  assert '--config.resources.actor.gpus=auto' in text
  learner_env = p.placement('learner/0').env
  assert learner_env['XLA_PYTHON_CLIENT_MEM_FRACTION'] == '0.75'
  assert learner_env['XLA_PYTHON_CLIENT_PREALLOCATE'] == 'false'
  assert learner_env['XLA_PYTHON_CLIENT_ALLOCATOR'] == 'default'
  assert len(p.gpu_usage) == 1


def test_a_learner_that_pmaps_gets_that_many_identical_gpus():
  p = plan('h100x8', learner__num_devices=4)
  assert p.placement('learner/0').gpus == (0, 1, 2, 3)
  assert p.placement('learner/0').devices == 4
  assert p.placement('learner/0').env['CUDA_VISIBLE_DEVICES'] == '0,1,2,3'
  assert 'XLA_FLAGS' not in p.placement('learner/0').env  # GPUs, not the CPU.
  assert [u.gpu.index for u in p.gpu_usage] == [0, 1, 2, 3]
  assert [g.index for g in p.idle_gpus] == [4, 5, 6, 7]
  assert 'learner/0 runs on 4 devices (GPUs 0,1,2,3)' in table.format_plan(p)
  p = plan('a100x2_t4', learner__num_devices=2)
  assert p.placement('learner/0').gpus == (0, 2)  # The A100s, not the T4.
  # The other nodes keep one device and no GPU.
  assert {p.placement(n).devices for n in ('actor/0', 'replay/0')} == {1}


def test_a_learner_on_several_cpu_devices_gets_the_xla_flag():
  """Without GPUs (or with gpus=none) the learner's devices are the CPU's,
  split by XLA's flag; the other nodes keep one device and no flag."""
  for p in (plan(learner__num_devices=2),
            plan('h100x8', learner__num_devices=2, learner__gpus='none')):
    learner = p.placement('learner/0')
    assert learner.gpus == () and learner.devices == 2
    assert learner.env['XLA_FLAGS'] == (
        '--xla_force_host_platform_device_count=2')
    assert learner.env['JAX_PLATFORMS'] == 'cpu'
    assert all('XLA_FLAGS' not in p.placement(n).env
               for n in ('replay/0', 'actor/0', 'evaluator/0'))
    text = table.format_plan(p)
    assert 'cpu x2' in text
    assert 'learner/0 runs on 2 devices (virtual CPU devices' in text
  # An XLA_FLAGS of the user's own keeps its flags, the planner's added.
  p = plan(learner__num_devices=3,
           learner__extra_env='XLA_FLAGS=--xla_cpu_enable_fast_math=false')
  assert p.placement('learner/0').env['XLA_FLAGS'] == (
      '--xla_cpu_enable_fast_math=false '
      '--xla_force_host_platform_device_count=3')
  # One device: no flag.
  assert 'XLA_FLAGS' not in plan().placement('learner/0').env


def test_a_learner_gpu_list_of_its_device_count_is_planned():
  p = plan('h100x8', learner__gpus='5,6', learner__num_devices=2)
  assert p.placement('learner/0').gpus == (5, 6)
  assert p.placement('learner/0').devices == 2


def test_learner_num_devices_is_read_from_a_whole_config():
  import ml_collections
  config = ml_collections.ConfigDict({'resources': specs.default_resources_config()})
  assert specs.learner_num_devices(config) == 1
  config.resources.learner.num_devices = 4
  assert specs.learner_num_devices(config) == 4
  del config.resources.learner.num_devices  # A config saved before it.
  assert specs.learner_num_devices(config) == 1


def test_empty_inventory_puts_everything_on_the_cpu():
  p = plan()
  for placement in p.placements:
    assert placement.gpus == ()
    assert placement.label == placement.group
    assert placement.env['CUDA_VISIBLE_DEVICES'] == ''
    assert placement.env['JAX_PLATFORMS'] == 'cpu'
    assert not any(k.startswith('XLA_PYTHON_CLIENT') for k in placement.env)
  assert p.gpu_usage == ()


def test_auto_actors_use_gpus_the_learner_leaves_free():
  p = plan('a100x2_t4', actor__gpus='auto')
  assert p.placement('actor/0').gpus == (1,)   # The T4.
  assert p.placement('actor/1').gpus == (2,)   # The other A100.
  assert p.idle_gpus == ()


def test_auto_actors_share_the_learners_gpus_round_robin_when_none_free():
  # A learner that pmaps over all eight leaves none free.
  p = plan('h100x8', learner__num_devices=8, actor__gpus='auto',
           evaluator__gpus='auto')
  assert [p.placement(n).gpus for n in ('actor/0', 'actor/1', 'evaluator/0')
          ] == [(0,), (1,), (2,)]
  assert {p.placement(n).label for n in ('actor/0', 'actor/1')} == {
      'actor_gpu0', 'actor_gpu1'}
  usage = {u.gpu.index: u for u in p.gpu_usage}
  assert usage[0].nodes == ('learner/0', 'actor/0')
  assert usage[0].planned_mb == (round(0.75 * 81559) + 500) + (
      round(0.1 * 81559) + 500)


def test_node_override_splits_the_group_label():
  p = plan('h100x8', learner__gpus='0', node_overrides='actor/1:gpus=1')
  actor0, actor1 = p.placement('actor/0'), p.placement('actor/1')
  assert actor0.label == 'actor_cpu' and actor1.label == 'actor_gpu1'
  assert actor1.gpus == (1,) and actor1.env['CUDA_VISIBLE_DEVICES'] == '1'
  assert actor0.env['CUDA_VISIBLE_DEVICES'] == ''
  by_label = p.env_by_label()
  assert by_label['actor_gpu1']['XLA_PYTHON_CLIENT_MEM_FRACTION'] == '0.1'
  assert by_label['actor_cpu']['JAX_PLATFORMS'] == 'cpu'


def test_node_overrides_of_several_fields_and_nodes():
  p = plan('h100x8', learner__gpus='0,1', learner__num_devices=2,
           node_overrides=(
      ' actor/0:gpus=2 ; actor/0:jax_mem_fraction=0.2; actor/0:jax_preallocate=true;'
      'actor/1:omp_threads=2;evaluator/0:extra_env=FOO=a,b,BAR=1 2'))
  actor0 = p.placement('actor/0').env
  assert actor0['CUDA_VISIBLE_DEVICES'] == '2'
  assert actor0['XLA_PYTHON_CLIENT_MEM_FRACTION'] == '0.2'
  assert actor0['XLA_PYTHON_CLIENT_PREALLOCATE'] == 'true'
  assert p.placement('actor/1').env['OMP_NUM_THREADS'] == '2'
  evaluator = p.placement('evaluator/0').env
  assert evaluator['FOO'] == 'a,b' and evaluator['BAR'] == '1 2'


def test_same_settings_on_differing_non_gpu_fields_get_numbered_labels():
  p = plan(node_overrides='actor/1:omp_threads=4')
  assert [p.placement(n).label for n in ('actor/0', 'actor/1')] == [
      'actor_cpu', 'actor_cpu_v2']


def test_threads_tf_mode_and_extra_env_reach_the_env():
  p = plan('rtx3080_3080ti', learner__tf_gpu='1024', learner__intra_op_threads=4,
           learner__inter_op_threads=2, learner__omp_threads=8,
           actor__tf_gpu='growth', actor__extra_env='TF_CPP_MIN_LOG_LEVEL=0')
  learner = p.placement('learner/0')
  assert learner.env['ACME_LAUNCH_TF_GPU'] == 'limit:1024'
  assert learner.env['ACME_LAUNCH_TF_INTRA_OP_THREADS'] == '4'
  assert learner.env['ACME_LAUNCH_TF_INTER_OP_THREADS'] == '2'
  assert learner.env['OMP_NUM_THREADS'] == '8'
  # The TF limit counts in the GPU's memory budget.
  assert learner.gpu_memory_mb == round(0.75 * 12288) + 500 + 1024
  actor = p.placement('actor/0').env
  assert actor['ACME_LAUNCH_TF_GPU'] == 'growth'
  assert actor['TF_CPP_MIN_LOG_LEVEL'] == '0'
  assert p.placement('replay/0').env['TF_CPP_MIN_LOG_LEVEL'] == '2'
  assert p.placement('replay/0').env['ACME_LAUNCH_TF_GPU'] == 'none'


@pytest.mark.parametrize('inventory_name', [None, 'rtx3080_3080ti',
                                            'a100x2_t4', 'h100x8'])
@pytest.mark.parametrize('settings', [
    {}, {'actor__gpus': 'auto', 'evaluator__gpus': 'auto'},
    {'node_overrides': 'actor/1:gpus=none;actor/0:omp_threads=1'}])
def test_env_values_are_strings_and_device_order_is_pci(inventory_name, settings):
  p = plan(inventory_name, **settings)
  assert [pl.node for pl in p.placements] == [f'{g}/{i}' for g, i in NODES]
  by_label = p.env_by_label()
  for placement in p.placements:
    assert all(isinstance(k, str) and isinstance(v, str)
               for k, v in placement.env.items())
    assert placement.env['CUDA_DEVICE_ORDER'] == 'PCI_BUS_ID'
    # Nodes under one label must want the same env (Launchpad keys by label).
    assert by_label[placement.label] == dict(placement.env)


BAD_INPUTS = [
    # (inventory, settings, words the one-line message must contain)
    ('rtx3080_3080ti', {'actor__gpus': '3'},
     ['actor/0', 'GPU 3', 'does not have', 'GPUs 0, 1']),
    (None, {'learner__gpus': '0'}, ['GPU 0', 'no GPUs', '--gpu_inventory']),
    (None, {'learner__jax_mem_fraction': 0.0},
     ['config.resources.learner.jax_mem_fraction', '(0, 1]']),
    (None, {'actor__jax_mem_fraction': 1.5},
     ['config.resources.actor.jax_mem_fraction', '(0, 1]', '1.5']),
    (None, {'node_overrides': 'actor/1:jax_mem_fraction=2'},
     ['node_overrides actor/1:jax_mem_fraction', '(0, 1]']),
    ('rtx3080_3080ti', {'learner__gpus': '0', 'learner__jax_mem_fraction': 0.9,
                        'actor__gpus': '0'},
     ['GPU 0', 'RTX 3080', 'over-committed', 'learner/0', 'actor/1',
      '10240 MB', 'jax_mem_fraction']),
    ('h100x8', {'learner__tf_gpu': '20000'}, ['GPU 0', 'over-committed']),
    ('rtx3080_3080ti', {'cuda_context_overhead_mb': 3100},
     ['GPU 1', 'over-committed', '3100 MB CUDA context']),
    (None, {'node_overrides': 'actorz/0:gpus=0'},
     ["unknown group 'actorz'", 'replay, counter, learner, inference, actor, evaluator']),
    (None, {'node_overrides': 'actor/7:gpus=0'},
     ["unknown node 'actor/7'", 'actor/0, actor/1']),
    (None, {'node_overrides': 'limiter/0:gpus=0'}, ["unknown group 'limiter'"]),
    (None, {'node_overrides': 'actor/0:gpu=0'},
     ["unknown field 'gpu'", 'gpus', 'jax_mem_fraction']),
    (None, {'node_overrides': 'actor/0=gpus=0'}, ['NODE:FIELD=VALUE']),
    (None, {'node_overrides': 'actor/0:gpus=0;actor/0:gpus=none'},
     ['actor/0:gpus twice']),
    (None, {'node_overrides': 'actor/0:jax_mem_fraction=half'},
     ['actor/0:jax_mem_fraction', 'expected float', "'half'"]),
    (None, {'node_overrides': 'actor/0:jax_preallocate=maybe'},
     ['expected true or false']),
    ('a100x2_t4', {'learner__gpus': '0,1', 'learner__num_devices': 2},
     ['learner/0', 'Tesla T4', 'A100', 'two GPU models']),
    # The learner's devices: a count >= 1; as many GPUs of one model; a
    # GPU list of that many; XLA's device flag the planner's alone.
    (None, {'learner__num_devices': 0},
     ['config.resources.learner.num_devices', '>= 1', '0']),
    ('a100x2_t4', {'learner__num_devices': 3},
     ['num_devices=3', '3 GPUs of one model', '0, 2 (NVIDIA A100',
      '1 (Tesla T4)', 'gpus=none']),
    ('rtx3080_3080ti', {'learner__num_devices': 2},
     ['num_devices=2', '2 GPUs of one model']),
    ('h100x8', {'learner__gpus': '0,1'},
     ['config.resources.learner.gpus=0,1 lists 2 GPUs',
      'num_devices=1', 'set num_devices=2']),
    ('h100x8', {'learner__gpus': '0,1,2', 'learner__num_devices': 2},
     ['lists 3 GPUs', 'num_devices=2']),
    (None, {'node_overrides': 'learner/0:num_devices=2'},
     ['node_overrides', 'config.resources.learner.num_devices']),
    (None, {'actor__num_devices': 2},
     ['config.resources.actor has unknown fields num_devices']),
    (None, {'learner__extra_env':
            'XLA_FLAGS=--xla_force_host_platform_device_count=4'},
     ['extra_env', '--xla_force_host_platform_device_count',
      'config.resources.learner.num_devices']),
    ('a100x2_t4', {'node_overrides': 'evaluator/0:gpus=1,2'},
     ['evaluator/0', 'two GPU models']),
    (None, {'learner__tf_gpu': 'lots'},
     ['config.resources.learner.tf_gpu', "'growth'", "'lots'"]),
    (None, {'learner__tf_gpu': 'limit:-5'}, ['tf_gpu', 'limit']),
    (None, {'actor__jax_allocator': 'magic'},
     ['config.resources.actor.jax_allocator', 'platform', "'magic'"]),
    (None, {'actor__gpus': 'first'}, ['config.resources.actor.gpus', "'first'"]),
    (None, {'actor__gpus': '0,0'}, ['GPU twice']),
    (None, {'replay__omp_threads': -1}, ['config.resources.replay.omp_threads',
                                         '>= 0']),
    (None, {'actor__extra_env': 'CUDA_VISIBLE_DEVICES=0'},
     ['config.resources.actor.extra_env', 'CUDA_VISIBLE_DEVICES', 'gpus']),
    (None, {'actor__extra_env': 'not an assignment'}, ['KEY=VALUE']),
    # A credential's value would be written to config.json: pass_env instead.
    (None, {'actor__extra_env': 'HF_TOKEN=hf_abc'},
     ['config.resources.actor.extra_env', 'HF_TOKEN', 'pass_env']),
    (None, {'actor__extra_env': 'PROXY=http://u:pw@h:1'}, ['PROXY', 'pass_env']),
    (None, {'actor__pass_env': 'HF_TOKEN=x'},
     ['config.resources.actor.pass_env', 'names only']),
    (None, {'cuda_context_overhead_mb': -1}, ['cuda_context_overhead_mb']),
]


@pytest.mark.parametrize('inventory_name,settings,words', BAD_INPUTS)
def test_bad_input_raises_one_clear_line(inventory_name, settings, words):
  with pytest.raises(errors.LaunchError) as raised:
    plan(inventory_name, **settings)
  message = str(raised.value)
  assert '\n' not in message
  for word in words:
    assert word in message


def test_unknown_group_or_field_in_a_config_file_is_refused():
  config = specs.default_resources_config()
  config.workers = specs.default_resources_config().actor
  with pytest.raises(errors.LaunchError, match='unknown entries workers'):
    resources.plan_resources(NODES, config)
  config = specs.default_resources_config()
  config.actor.gpu = '0'
  with pytest.raises(errors.LaunchError, match=r'actor has unknown fields gpu'):
    resources.plan_resources(NODES, config)


def test_unknown_node_group_is_refused():
  with pytest.raises(errors.LaunchError, match="unknown node group 'learners'"):
    resources.plan_resources([('learners', 0)],
                             specs.default_resources_config())


def test_format_plan_lists_every_node_label_gpu_and_env():
  p = plan('a100x2_t4', actor__gpus='auto', node_overrides='actor/1:gpus=none')
  text = table.format_plan(p)
  for placement in p.placements:
    assert placement.node in text and placement.label in text
  assert 'Tesla T4' in text and 'CUDA_VISIBLE_DEVICES=0 ' in text
  assert "CUDA_VISIBLE_DEVICES=''" in text
  assert 'XLA_PYTHON_CLIENT_MEM_FRACTION=0.75' in text
  assert 'no GPU used' in table.format_plan(plan())


def test_every_field_is_overridable_from_the_command_line(tmp_path):
  config_file = tmp_path / 'resources_config.py'
  config_file.write_text(textwrap.dedent('''
      import ml_collections
      from acme_launch.plan import specs

      def get_config():
        config = ml_collections.ConfigDict()
        config.resources = specs.default_resources_config()
        return config
  '''))
  argv = [
      'prog', f'--config={config_file}',
      '--config.resources.learner.gpus=0,1',
      '--config.resources.learner.num_devices=2',
      '--config.resources.learner.jax_mem_fraction=0.5',
      '--config.resources.learner.jax_preallocate=true',
      '--config.resources.learner.jax_allocator=platform',
      '--config.resources.learner.tf_gpu=growth',
      '--config.resources.actor.gpus=auto',
      '--config.resources.actor.omp_threads=1',
      '--config.resources.actor.extra_env=A=1,B=2',
      '--config.resources.node_overrides=actor/1:gpus=2;actor/0:gpus=none',
      '--config.resources.cuda_context_overhead_mb=300',
  ]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file('config', flag_values=flag_values,
                                  sys_argv=argv)
  flag_values(argv)
  config = flag_values.config.resources
  assert config.learner.gpus == '0,1'
  assert config.learner.jax_mem_fraction == 0.5
  assert config.learner.jax_preallocate is True
  p = resources.plan_resources(NODES, config, inventory('h100x8'))
  assert p.placement('learner/0').env['XLA_PYTHON_CLIENT_ALLOCATOR'] == 'platform'
  assert p.placement('learner/0').gpu_memory_mb == round(0.5 * 81559) + 300
  assert p.placement('actor/1').gpus == (2,)
  assert p.placement('actor/0').gpus == ()
  assert p.placement('evaluator/0').gpus == ()
  assert p.placement('actor/1').env['A'] == '1'


def test_inventory_file_errors(tmp_path):
  bad = tmp_path / 'bad.json'
  for content, words in [
      ('{"index": 0}', 'JSON list'),
      ('[{"index": 0, "name": "X"}]', 'memory_mb'),
      ('[{"index": 0, "name": "X", "memory_mb": 1},'
       ' {"index": 0, "name": "X", "memory_mb": 1}]', 'index twice'),
      ('not json', 'not JSON')]:
    bad.write_text(content)
    with pytest.raises(errors.LaunchError, match=words):
      gpu_inventory.read_inventory(str(bad))
  with pytest.raises(errors.LaunchError, match='cannot read GPU inventory'):
    gpu_inventory.read_inventory(str(tmp_path / 'missing.json'))


def test_nvidia_smi_output_parsing():
  assert gpu_inventory.parse_nvidia_smi(
      '0, Tesla T4, 15360\n\n1, Odd, Name, 80\n2, Broken, [N/A]\n') == (
          gpu_inventory.GpuInfo(0, 'Tesla T4', 15360),
          gpu_inventory.GpuInfo(1, 'Odd, Name', 80))


def test_read_inventory_on_this_machine_returns_gpu_infos():
  gpus = gpu_inventory.read_inventory()
  assert isinstance(gpus, tuple)
  assert all(isinstance(g, gpu_inventory.GpuInfo) for g in gpus)


def test_pass_env_names_reach_their_nodes_plan_and_no_values():
  p = plan(actor__pass_env='HF_TOKEN, AWS_*,HF_TOKEN',
           node_overrides='evaluator/0:pass_env=WANDB_API_KEY')
  variable = node_env.variable('pass_env')
  assert p.placement('actor/0').env[variable] == 'HF_TOKEN,AWS_*'
  assert p.placement('actor/0').settings.pass_env == ('HF_TOKEN', 'AWS_*')
  assert p.placement('evaluator/0').env[variable] == 'WANDB_API_KEY'
  assert variable not in p.placement('learner/0').env
