"""Credentials: kept out of node processes, and masked in what is written.

Two rules, both here so that every module applies the same one.

Node environments. A node process (local_mp, ray) gets the environment it
would inherit (the launcher's; on a Ray host, its Ray worker's) less every
variable that `is_withheld`: named like a credential (WITHHELD: the
trackers' variables, cloud credentials, anything named *_TOKEN, *PASSWORD*,
*SECRET*, *_KEY, ...) or holding a URL with a password. Nodes do not track
(the launcher follows their CSV files into W&B and MLflow), upload or call
cloud APIs, and every node serves unauthenticated Courier and Reverb ports:
what a node does not hold, they cannot leak. A config hands some to a
group's nodes anyway by name: `config.resources.<group>.pass_env`
(names or patterns, never values, so nothing secret is written to
config.json or printed by --dry_run).

Masking. A password in a URL's user part (`user:PASSWORD@`), a user part
that is a bare token (`TOKEN@host`), and query values whose names look like
credentials (`?token=`, `&sig=`, `X-Amz-Signature=`) become MASK in
everything the launcher writes or prints: config.json's argv, tracking.json,
sweep.json, its messages. A masked URI cannot be used again, so a resumed
run asks for it anew (tracking.resumed_uri).
"""

import fnmatch
import re
import urllib.parse
from typing import Dict, Iterable, List, Mapping, Sequence

MASK = '***'

# Names (upper-cased, fnmatch patterns) of variables nodes never inherit.
WITHHELD = (
    # The trackers' own: only the launcher tracks.
    'WANDB_*', 'MLFLOW_*',
    # Cloud and service credentials by their providers' names.
    'AWS_*', 'AZURE_*', 'GOOGLE_APPLICATION_CREDENTIALS', 'DATABRICKS_*',
    'SSH_AUTH_SOCK',
    # Anything named as a secret.
    'TOKEN', '*_TOKEN', '*_TOKEN_*', '*PASSWORD*', '*PASSWD*', '*SECRET*',
    '*_KEY', '*APIKEY*', '*API_KEY*', '*CREDENTIAL*',
)

# user:password@ (the password up to the netloc's last '@'), or a bare
# token@ as the whole user part, after a URL's scheme.
_USERINFO = re.compile(
    r'(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)'
    r'(?:(?P<user>[^\s/?#@:]*):(?P<password>[^\s/?#]*)|(?P<token>[^\s/?#@:]+))@')
# A URL, to its first whitespace; within one, a query parameter whose name
# looks like a credential, and its value.
_URL = re.compile(r'\b[A-Za-z][A-Za-z0-9+.-]*://\S+')
_QUERY = re.compile(
    r'(?P<name>[?&;][^=&;\s#]*?(?:token|key|pass|pwd|secret|sig|auth|cred)'
    r'[^=&;\s#]*=)(?P<value>[^&;\s#]*)', re.IGNORECASE)


def _masked_userinfo(match: 're.Match') -> str:
  if match.group('token') is not None:
    return f'{match.group("scheme")}{MASK}@'
  return f'{match.group("scheme")}{match.group("user")}:{MASK}@'


def mask(text: str) -> str:
  """`text` (a URI, a command-line argument, a message) with every URL
  password, user-part token and credential-named query value as MASK."""
  text = _USERINFO.sub(_masked_userinfo, text)
  return _URL.sub(
      lambda url: _QUERY.sub(lambda m: m.group('name') + MASK, url.group()),
      text)


def mask_all(texts: Iterable[str]) -> List[str]:
  """`mask` of each, e.g. a command line before it is recorded."""
  return [mask(text) for text in texts]


def has_credentials(uri: str) -> bool:
  """Whether masking changes `uri`: it holds something it must not show."""
  return mask(uri) != uri


def is_masked(uri: str) -> bool:
  """Whether `uri` is a masked one (`mask` put MASK where credentials
  were): it cannot be used as it is."""
  return (any(MASK in (m.group('password') or m.group('token') or '')
              for m in _USERINFO.finditer(uri)) or
          any(m.group('value') == MASK for url in _URL.finditer(uri)
              for m in _QUERY.finditer(url.group())))


def without_credentials(uri: str) -> str:
  """`uri` with its user part and query left out: an address to probe."""
  parsed = urllib.parse.urlsplit(uri)
  netloc = parsed.netloc.rpartition('@')[2]
  return urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, '', ''))


def is_withheld(name: str, value: str = '') -> bool:
  """Whether a node must not inherit the variable `name`=`value`."""
  upper = name.upper()
  return (any(fnmatch.fnmatchcase(upper, p) for p in WITHHELD) or
          any(m.group('password') is not None
              for m in _USERINFO.finditer(value)))


def is_passed(name: str, passed: Sequence[str]) -> bool:
  """Whether `name` matches one of `passed` (names or fnmatch patterns)."""
  return any(fnmatch.fnmatchcase(name, p) for p in passed)


def node_environ(environ: Mapping[str, str],
                 passed: Sequence[str] = ()) -> Dict[str, str]:
  """`environ` less what `is_withheld`, except the variables `passed`
  names (pass_env): what a node process inherits."""
  return {k: v for k, v in environ.items()
          if not is_withheld(k, v) or is_passed(k, passed)}
