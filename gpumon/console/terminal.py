"""Whether gpumon writes to a terminal: the live monitor (run, attach) needs one on stdout and stderr."""

from __future__ import annotations

import os
import sys


def output_not_terminal() -> str | None:
    """Which of stdout and stderr is not a terminal, as a clause ("stdout is not a terminal", "stdout and stderr are
    not terminals"), else None.

    The live monitor needs both: Textual draws on stderr, and a redirected stdout must get text,
    not escape codes. Without them ``gpumon run`` runs headless.
    """
    names = []
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        try:
            if not os.isatty(stream.fileno()):
                names.append(name)
        except (AttributeError, OSError, ValueError):
            names.append(name)
    if not names:
        return None
    return (
        f"{names[0]} is not a terminal"
        if len(names) == 1
        else f"{' and '.join(names)} are not terminals"
    )
