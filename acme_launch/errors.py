"""The one error type whose message is the line a user sees."""


class LaunchError(Exception):
  """Bad input found before launch: the CLI prints the message, exits 2."""


class DeprecatedName(UserWarning):
  """A name of ours the user's code still uses that goes in a later version.

  A UserWarning, so that it shows: Python hides DeprecationWarning outside
  `__main__`, and the launcher silences third-party ones (quiet.py).
  """
