"""The distribution tests' scipy calls in a helper process, started before the runs are read.

Importing scipy.stats takes about a second (scipy 1.17 parses its docstrings at import), as long as
reading an hour-long capture, and a thread cannot overlap the two (both hold the GIL). A helper
process started first imports it on another core while compare reads the runs, then takes the
samples over a pipe and returns the figures: the same functions (``distributions.scipy_stats``) on
the same arrays. Worth it only where scipy.stats is not imported yet and the runs are big: on the quiet
2-core box, ``gpumon compare`` of an hour-long pair took 1.74-2.06 s with the helper and 2.45-2.61 s without
(benchmarks/README.md: ~0.6 s of wall time for ~0.4 s more CPU); measured again with
``benchmarks/startup.py --compare`` (a 700,000-step pair, 2026-11-27, the 2-core VM at load 12-19, two runs
of 5 each): 9.9 s and 14.3 s with the helper, 10.8 s and 15.6 s without (1.09x), so it stays. This module
imports neither numpy nor scipy, so ``gpumon compare`` can start the helper first thing.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from gpumon.core.jobs.lifeline import die_with_parent, exit_now
from gpumon.extras import installed

if TYPE_CHECKING:
    from gpumon.analysis.distributions import DistributionTest, Samples, Stats

# Steps to read above which the helper pays (~5 min of two jobs at 200 steps/s).
HELPER_BYTES = 8 << 20
# ``python -c _HELPER <sys.path as JSON>``: this interpreter, the modules this process would import.
_HELPER = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from gpumon.analysis.stats_helper import serve; serve()"
)


def serve() -> None:
    """The helper: import scipy.stats, then read a pickled batch of Samples and write their scipy_stats."""
    import scipy.stats  # noqa: F401 - first: the parent sends its samples once it has read the runs

    # in the helper only: the parent imports this module on gpumon --help, without numpy
    from gpumon.analysis.distributions import scipy_stats

    batch = pickle.load(sys.stdin.buffer)
    pickle.dump(scipy_stats(batch), sys.stdout.buffer)
    # the answer is out: skip the interpreter's teardown, which the parent, waiting for the end of the pipe
    # and the exit, would otherwise wait for
    exit_now(0)


# A helper started before the runs were named (``start_early``), for ``for_runs`` to keep or end.
_early: list[Tests] = []


def start_early() -> None:
    """Start a helper first thing, before the arguments are parsed and the runs resolved (``gpumon compare``).

    It buys the 0.04-0.09 s they take (measured: the parser 0.02 s, resolving the runs 0.04 s) for the helper's
    import, the comparison's critical path. ``for_runs`` keeps it where a helper pays and ends it where not
    (small runs: it had that long, on the other core).
    """
    if not _early and installed("scipy") and "scipy.stats" not in sys.modules:
        _early.append(Tests(helper=True))


def for_runs(run_dirs: Sequence[Path]) -> Tests | None:
    """Where the tests of a comparison of ``run_dirs`` run: None without scipy; a helper where it pays
    (scipy.stats not imported here yet, and the runs' steps.csv add up to HELPER_BYTES), the early one if
    ``start_early`` started it."""
    early = _early.pop() if _early else None
    if not installed("scipy"):
        return None
    total = 0
    for run_dir in run_dirs:
        try:
            total += (run_dir / "steps.csv").stat().st_size
        except OSError:
            pass
    pays = "scipy.stats" not in sys.modules and total >= HELPER_BYTES
    if early is not None:
        if pays:
            return early
        early.close()
    return Tests(helper=pays)


class Tests:
    """The scipy tests of one comparison, in a helper process when ``helper``, else here.

    ``run`` hands over the batch, ``results`` waits for the answer. If the helper cannot start or
    fails, the tests run here, with the same code.
    """

    def __init__(self, helper: bool) -> None:
        self._batch: list[Samples] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._talk: threading.Thread | None = None
        self._answer: bytes | None = None
        self._said = b""
        if helper and sys.executable:
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-c", _HELPER, json.dumps(sys.path)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    preexec_fn=functools.partial(die_with_parent, os.getpid()),
                )
            except (OSError, ValueError):
                self._proc = None
        self._end = weakref.finalize(self, _stop, self._proc) if self._proc is not None else None

    def close(self) -> None:
        """End a helper that will not be given a batch (the tests run here)."""
        if self._end is not None:
            self._end()
        self._proc = None

    def run(self, batch: Sequence[Samples]) -> None:
        """Start the tests of ``batch`` (in the helper while this process goes on)."""
        self._batch = list(batch)
        proc = self._proc
        if proc is None:
            return
        payload = pickle.dumps(self._batch)

        def talk() -> None:
            try:
                self._answer, self._said = proc.communicate(payload)
            except OSError:
                self._answer = None

        self._talk = threading.Thread(target=talk, name="gpumon-tests", daemon=True)
        self._talk.start()

    def results(self) -> list[DistributionTest]:
        """The tests of the batch, in its order."""
        # deferred: +0.08 s CPU (numpy) on gpumon --help (commands/compare.py imports this module)
        from gpumon.analysis.distributions import result_of, scipy_stats

        stats: list[Stats] | None = None
        if self._talk is not None and self._proc is not None:
            self._talk.join()
            if self._proc.returncode == 0 and self._answer:
                if self._said:  # scipy's warnings, through this process's stderr (which a front end may capture)
                    sys.stderr.write(self._said.decode("utf-8", "replace"))
                try:
                    stats = pickle.loads(self._answer)
                except Exception:  # noqa: BLE001 - a garbled answer: the tests run here
                    stats = None
        if stats is None or len(stats) != len(self._batch):
            stats = scipy_stats(self._batch)
        return [result_of(s, st) for s, st in zip(self._batch, stats)]


def _stop(proc: "subprocess.Popen[bytes]") -> None:
    """End a helper that was never given its batch (the comparison failed first)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
