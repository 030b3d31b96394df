"""Whether a stream gets ANSI colour: a terminal, and NO_COLOR unset or empty (https://no-color.org)."""

from __future__ import annotations

import os
import sys
from typing import IO


def use_color(stream: IO[str] | None = None) -> bool:
    """ANSI colour only for a terminal (``stream``, default stdout), and never when NO_COLOR is set."""
    stream = stream if stream is not None else sys.stdout
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR")
