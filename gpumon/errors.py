"""The one exception type that the CLI turns into a one-line error and exit status 2."""


class UsageError(Exception):
    """Bad input from the user: printed as ``gpumon: error: <message>``, exit status 2."""
