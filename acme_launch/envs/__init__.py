"""Environment factories: tasks of registered families on two backends, as
dm_env.

A task is named `FAMILY:NAME`, the family prefix optional for gym. Each
family is one registered value (`Family`, registry.py); these ship:

  family      example                   library
  gym         HalfCheetah-v4            gym 0.25 (v4 tasks, as published results;
                                        gym's MODULE:ID form too)
  gymnasium   gymnasium:HalfCheetah-v5  Gymnasium 1.x (v5 tasks), our adapter
  dmc         dmc:walker-walk           dm_control suite, Acme's wrappers
  atari       atari:Pong                Atari games, one protocol (atari.py):
                                        EnvPool's, or ale-py's under Gymnasium's
                                        wrappers (atari_gymnasium.py)
  minatar     minatar:breakout          MinAtar's five 10x10 games (gym backend
                                        only), MinAtar's protocol (minatar.py)
  pomdp       pomdp:CartPole-v1         Gymnasium control tasks with their
                                        velocities hidden: memory tasks (gym
                                        backend only; pomdp.py)
  user        my_project.envs:make_env  a factory of the user's (user.py)

and a user adds their own with `register_family`, from a module that
`config.env_modules` names.

`env_backend` says what steps them:

  gym      one Python environment object per environment, from the family's
           own library (the default; atari: Gymnasium + ale-py)
  envpool  one EnvPool instance steps all N environments of an actor in C++
           (the gym family tasks EnvPool ships: the MuJoCo v4 tasks,
           CartPole-v1, ...; and its dm_control suite tasks, dmc:walker-walk
           as EnvPool's WalkerWalk-v1; its Atari games)

Whatever the family and backend, an agent sees the same thing: single
precision, continuous actions in [-1, 1] (rescaled to the task's bounds and
clipped), discount 0 only on a true termination (a time limit keeps
discount 1).
"""

# The public names, from the modules that hold them: registry.py (families,
# naming and checking tasks), families.py (gym, Gymnasium, dm_control),
# atari.py (the Atari protocol; atari_gymnasium.py, imported when a game is
# made), minatar.py (MinAtar's games), pomdp.py (memory tasks), user.py (the
# user's factories), batched.py (N environments as arrays),
# envpool_backend.py, factory.py (what callers make). Importing a family's
# module registers it: all of them are imported here.
from acme_launch import compat  # JAX aliases; before acme
# In the order the unknown-family line names them.
from acme_launch.envs import families, atari, minatar, pomdp, user  # noqa: F401
from acme_launch.envs.batched import PythonEnvironments, TimeSteps
from acme_launch.envs.envpool_backend import EnvPoolEnvironment, EnvPoolEnvironments
from acme_launch.envs.factory import (
    consecutive_seeds, make_environment, make_environments, node_seed,
    task_action_bounds)
from acme_launch.envs.families import GymnasiumEnvironment
from acme_launch.envs.minatar import MinAtarEnvironment
from acme_launch.envs.registry import (
    BACKENDS, Family, Task, all_families, check_task, family, parse_task,
    register_family)

__all__ = [
    'BACKENDS', 'EnvPoolEnvironment', 'EnvPoolEnvironments', 'Family',
    'GymnasiumEnvironment', 'MinAtarEnvironment', 'PythonEnvironments',
    'Task', 'TimeSteps', 'all_families', 'check_task', 'consecutive_seeds',
    'family', 'make_environment', 'make_environments', 'node_seed',
    'parse_task', 'register_family', 'task_action_bounds',
]
