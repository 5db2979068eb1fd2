"""Environment families as registered values: `config.env_name` parsed,
checked before launch and made in every node through one registry.

A family is one frozen `Family` value: its name (the `FAMILY:` of
`FAMILY:NAME`), the backends that run it, the packages it imports, a check
that refuses a name it does not have, and the maker of one environment; the
rest of what differs between families (EnvPool's id and options, a default
episode limit, whether its environments need our wrappers) are fields too,
so nothing above reads a family's name. The shipped families register
themselves in their own modules (families.py, atari.py, minatar.py,
pomdp.py, user.py); a user's family registers the same way from a module of
theirs that `config.env_modules` names, imported in the launcher before the
check and in every node before an environment is made
(docs/own-agents-and-envs.md#your-own-environment-family).
"""

import dataclasses
import importlib
from typing import Callable, Dict, Iterable, Mapping, Optional, Tuple

from acme_launch import errors

BACKENDS = ('gym', 'envpool')
# What every task on a backend imports beyond its family's own packages.
BACKEND_PACKAGES = {'envpool': ('envpool',)}


@dataclasses.dataclass(frozen=True)
class Family:
  """One environment family.

  `make(name, seed, ...)` returns one dm_env environment of task `name`
  seeded with `seed`; of `max_episode_steps`, `evaluation` (the evaluators'
  version of a task, where it differs) and `config` it is passed those its
  signature names. One that takes no `max_episode_steps` gets a step limit
  wrapped around it when the config sets one. `check(name, env_name,
  backend)` raises LaunchError (one line; `env_name` is the user's whole
  string) when `name` is not a task the family runs on `backend`.
  """
  name: str                   # The FAMILY of FAMILY:NAME.
  backends: Tuple[str, ...]   # Of BACKENDS.
  packages: Tuple[str, ...]   # Imported by the check on every backend.
  check: Callable[[str, str, str], None]
  make: Callable[..., object]
  # Imported by the check on one backend only (Atari on gym: ale-py).
  backend_packages: Mapping[str, Tuple[str, ...]] = dataclasses.field(
      default_factory=dict)
  # The envpool backend: EnvPool's id of a task ('' where it has none), and
  # the make() options of a pool (`evaluation`: the evaluators' pool).
  envpool_id: Optional[Callable[[str], str]] = None
  envpool_options: Optional[Callable[[bool], Mapping[str, object]]] = None
  # The episode limit where config.env_max_episode_steps is 0 (0: the
  # task's own).
  max_episode_steps: int = 0
  # False: make's environments are single precision with discrete actions
  # already, and skip Acme's wrappers (MinAtar: they cost more than a step).
  wrap: bool = True
  # How the unknown-family line names its tasks ('atari:GAME'); '': not
  # named there.
  example: str = ''
  # The line for a backend not in `backends`, with {env_name} and
  # {backend}; '': a line that names the family's backends.
  backend_error: str = ''
  # Takes env_names without a registered FAMILY: prefix (gym's TASK and
  # MODULE:ID, the user's MODULE:FN); its task's name is the whole string.
  claims: Optional[Callable[[str], bool]] = None

  def packages_for(self, backend: str) -> Tuple[str, ...]:
    return (self.packages + tuple(self.backend_packages.get(backend, ())) +
            BACKEND_PACKAGES.get(backend, ()))


@dataclasses.dataclass(frozen=True)
class Task:
  family: str  # A registered family's name.
  name: str    # The family's own id: 'HalfCheetah-v5', 'walker-walk'.


_FAMILIES: Dict[str, Family] = {}
_SHIPPED = ('gym', 'gymnasium', 'dmc', 'atari', 'minatar', 'pomdp', 'user')


def register_family(value: Family) -> Family:
  """Adds a family (a later one of the same name replaces a user's own;
  the shipped ones stay). Returns it, so a module can keep the value."""
  if not isinstance(value, Family):
    raise errors.LaunchError(
        f'register_family takes an acme_launch.envs.Family, got '
        f'{type(value).__name__}')
  if value.name in _SHIPPED and value.name in _FAMILIES:
    raise errors.LaunchError(
        f'environment family {value.name!r} is one of ours; register yours '
        'under another name')
  if not value.name or ':' in value.name:
    raise errors.LaunchError(
        f'environment family name {value.name!r}: a non-empty name without '
        "':'")
  unknown = [b for b in value.backends if b not in BACKENDS]
  if unknown or not value.backends:
    raise errors.LaunchError(
        f'environment family {value.name!r}: backends {value.backends!r}; '
        f'choose from: {", ".join(BACKENDS)}')
  if 'envpool' in value.backends and value.envpool_id is None:
    raise errors.LaunchError(
        f'environment family {value.name!r} runs on envpool: give it an '
        'envpool_id (EnvPool\'s id of a task)')
  _FAMILIES[value.name] = value
  return value


def family(name: str) -> Family:
  """The registered family `name`; LaunchError (one line) if none is."""
  try:
    return _FAMILIES[name]
  except KeyError:
    raise errors.LaunchError(
        f'unknown environment family {name!r}; registered: '
        f'{", ".join(_FAMILIES)}') from None


def all_families() -> Tuple[Family, ...]:
  """Every registered family, in the order they were registered."""
  return tuple(_FAMILIES.values())


def import_modules(modules: Iterable[str]) -> None:
  """Imports config.env_modules (a name or several), whose import registers
  the user's families; LaunchError (one line) if one cannot be imported."""
  for module in ((modules,) if isinstance(modules, str) else modules or ()):
    try:
      importlib.import_module(module)
    except Exception as e:
      raise errors.LaunchError(
          f'config.env_modules: importing {module} failed: '
          f'{type(e).__name__}: {" ".join(str(e).split())[:200]}') from None


def parse_task(env_name: str) -> Task:
  """'gymnasium:HalfCheetah-v5' -> Task('gymnasium', 'HalfCheetah-v5')."""
  prefix, sep, name = env_name.partition(':')
  if sep and prefix in _FAMILIES:
    if name:
      return Task(prefix, name)
  else:
    for value in _FAMILIES.values():
      if value.claims is not None and value.claims(env_name):
        return Task(value.name, env_name)
  examples = [value.example for value in _FAMILIES.values() if value.example]
  raise errors.LaunchError(
      f'config.env_name {env_name!r}: unknown task family {prefix!r}; '
      f'name a task as {", ".join(examples[:-1])} or {examples[-1]}')


def check_task(env_name: str, backend: str, modules: Iterable[str] = ()
               ) -> Task:
  """The task, or LaunchError (one line naming the choices) before launch.
  `modules`: config.env_modules, imported first."""
  if backend not in BACKENDS:
    raise errors.LaunchError(
        f'config.env_backend {backend!r} is unknown; choose one of: '
        f'{", ".join(BACKENDS)}')
  import_modules(modules)
  task = parse_task(env_name)
  value = family(task.family)
  if backend not in value.backends:
    raise errors.LaunchError(
        value.backend_error.format(env_name=env_name, backend=backend) or
        f'config.env_backend {backend} does not run {value.name} tasks: use '
        f'config.env_backend={" or ".join(value.backends)}')
  for package in value.packages_for(backend):
    try:
      importlib.import_module(package)
    except ImportError as e:  # Missing, or a library it links is missing.
      raise errors.LaunchError(
          f'{package} cannot be imported ({" ".join(str(e).split())[:200]}); '
          f'it runs {env_name!r} on the {backend} backend: run '
          'scripts/setup.sh, which installs the lock, or choose '
          f'config.env_backend from: {", ".join(BACKENDS)}') from None
  value.check(task.name, env_name, backend)
  return task
