"""gpumon's real CLI run in the test's own process (fast enough for hypothesis), its output captured."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

from gpumon.cli import main


def cli(*args: str) -> tuple[int, str, str]:
    """The real CLI in this process: (exit status, stdout, stderr); SystemExit counts as its status."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()
