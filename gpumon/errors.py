"""The errors gpumon reports in one line, without a traceback, each with its own exit status.

``UsageError``: the input is wrong (an unknown workload, a bad option value, a run that does not exist or
cannot be read): exit status 2, and nothing was started or created. ``EnvironmentFailure``: the input was
fine but the machine or the moment was not (a job that cannot be started, a disk that cannot be written, a
port already taken, a daemon that would not start, a request made while gpumon shuts down): exit status 1.
Both print ``gpumon: error: <message>`` (``cli.py``); the TUI shows the message as a notification.
"""


class GpumonError(Exception):
    """An error gpumon explains in one line; ``exit_status`` is what the program then returns."""

    exit_status = 1


class UsageError(GpumonError):
    """Bad input from the user: printed as ``gpumon: error: <message>``, exit status 2."""

    exit_status = 2


class EnvironmentFailure(GpumonError):
    """Good input that this machine could not carry out (Popen, a disk write, a port, shutdown): exit status 1."""

    exit_status = 1
