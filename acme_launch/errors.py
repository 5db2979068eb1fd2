"""The one error type whose message is the line a user sees."""


class LaunchError(Exception):
  """Bad input found before launch: the CLI prints the message, exits 2."""
