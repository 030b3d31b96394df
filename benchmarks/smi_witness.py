"""`nvidia-smi dmon` and `pmon`, the driver's own tools, as witnesses: started beside a capture, read back by wall time.

    witness = Witness.start("dmon", path, gpu_index)  # None where there is no nvidia-smi
    ...
    witness.stop()
    table = read_table(path)                            # one row per line, 'wall' in seconds since 1970

Both print one line per second (`-d 1`) with the date and time (`-o DT`, local time, whole seconds);
'-' (nothing to report) reads as NaN. dmon's PCIe columns are MB/s, taken as 10^6 bytes (MB_BYTES).
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpumon.core.jobs.lifeline import die_with_parent  # noqa: E402

MB_BYTES = 1e6
ARGS = {"dmon": ["-s", "putcm"], "pmon": ["-s", "um"]}
STOP_WAIT_S = 5.0


@dataclass
class Witness:
    """One `nvidia-smi dmon|pmon` process writing to ``path``, tied to this process's life."""

    kind: str
    path: Path
    proc: subprocess.Popen

    @classmethod
    def start(cls, kind: str, path: Path, gpu_index: int | None) -> "Witness | None":
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return None
        # Line-buffered where stdbuf exists: nvidia-smi writes to a file, and what a killed process held is lost.
        argv = ([shutil.which("stdbuf"), "-oL"] if shutil.which("stdbuf") else []) + [
            smi,
            kind,
            *ARGS[kind],
        ]
        argv += ["-d", "1", "-o", "DT"] + (["-i", str(gpu_index)] if gpu_index is not None else [])
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
            )
        return cls(kind, path, proc)

    def stop(self) -> None:
        """Ctrl-C (nvidia-smi flushes and exits on it), then SIGKILL if it lingers."""
        for signum in (signal.SIGINT, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, signum)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                continue
        self.proc.wait()


def _number(text: str) -> float | str:
    if text == "-":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: Path) -> list[dict]:
    """The lines of a `-o DT` dmon/pmon file as dicts of its columns, plus 'wall' (seconds since 1970)."""
    if not path.exists():
        return []
    columns: list[str] = []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0].startswith("#"):
            if fields[0] == "#Date" and not columns:
                columns = ["Date", *fields[1:]]
            continue
        if not columns or len(fields) < len(columns) - 1:
            continue
        last = len(columns) - 1  # pmon's command name may hold spaces: the rest of the line
        row = {name: _number(value) for name, value in zip(columns[:last], fields[:last])}
        row[columns[last]] = _number(" ".join(fields[last:]))
        try:
            row["wall"] = time.mktime(time.strptime(f"{fields[0]} {fields[1]}", "%Y%m%d %H:%M:%S"))
        except ValueError:
            continue
        rows.append(row)
    return rows


def between(rows: list[dict], start: float, end: float) -> list[dict]:
    """The lines stamped inside [start, end] (wall seconds; a line's stamp is a whole second)."""
    return [row for row in rows if start <= row["wall"] <= end]
