"""A command line as a launcher started in another folder reads it."""

from acme_launch.config import options


def test_relative_path_flags_are_read_from_the_given_folder():
  argv = ['launch.py', '--config=my/config.py', '--workdir', 'runs',
          '--gpu_inventory=inv.json', '--resume=/abs/run',
          '--config.env_name=Hopper-v4', '--run_name=x']
  assert options.paths_from(argv, '/home/u') == [
      'launch.py', '--config=/home/u/my/config.py', '--workdir',
      '/home/u/runs', '--gpu_inventory=/home/u/inv.json',
      '--resume=/abs/run', '--config.env_name=Hopper-v4', '--run_name=x']


def test_a_registry_name_stays_a_name():
  assert options.paths_from(['launch.py', '--config=smoke'], '/x') == [
      'launch.py', '--config=smoke']
