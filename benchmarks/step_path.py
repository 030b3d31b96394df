"""What a training step costs gpumon on its way from the probe pipe to the live figures and the disk, in-process.

    python benchmarks/step_path.py [--steps N] [--rounds R] [--before DIR]

The tree's real classes, fed two jobs' probe lines (25 steps a message, as a probe flushing every 100 ms at 250
steps a second writes them): a Listener decodes them and publishes onto a Bus whose subscribers are a session's
(the live window, the no-steps and stagger watches, a Recorder writing a real run directory) plus, for the TUI
rows, the monitor's model and the live window's overlap rates (a runner keeps those only with ``--baseline``). The recorder's writer drains its queue once a second's worth of steps (500) has come,
and the live window gives every job's figures as often (what the screen's refresh or the runner's status line asks
each second). Each part runs on the calling thread, timed with ``time.thread_time``: the listener's share, the
recorder's (its queue drained into CSV, written), the live figures'. Prints µs a step for each, runner (no model)
and TUI; with ``--before DIR``, the same for another gpumon tree (``git worktree add DIR <commit>``), the trees
alternating R times in this one run, then after ÷ before of the medians. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = "GPUMON_STEP_PATH_CHILD"
PARTS = ("listener", "recorder", "live")
ROWS_PER_MESSAGE = 25
SECOND = 500  # steps of both jobs a second: the recorder drains and the live figures are asked this often


def probe_lines(steps: int, t0_ns: int) -> list[tuple[str, bytes]]:
    """Two jobs' probe messages, interleaved as they arrive: (slot, line)."""
    lines = []
    for first in range(0, steps // 2, ROWS_PER_MESSAGE):
        for slot, pid, period_ns in (("A", 101, 4_000_000), ("B", 102, 4_000_000)):
            rows = [
                [n, t0_ns + (n + 1) * period_ns, period_ns, 32.0, int(n < 10), 4096, 20_000]
                for n in range(first, first + ROWS_PER_MESSAGE)
            ]
            message = {"v": 1, "pid": pid, "type": "steps", "rows": rows}
            lines.append((slot, json.dumps(message).encode()))
    return lines


def child(steps: int, tui: bool) -> dict[str, float]:
    """In the child (its PYTHONPATH the tree measured): µs a step for each part."""
    from gpumon.core.capture.nosteps import NoStepsWatch
    from gpumon.core.capture.stagger import StaggerWatch
    from gpumon.core.interference.live import LiveStats
    from gpumon.core.probing.listener import Listener, _Stream
    from gpumon.core.records.bus import Bus
    from gpumon.core.records.clock import RunClock
    from gpumon.core.records.model import WorkloadState
    from gpumon.core.store.recorder import Recorder, create_run_dir
    from gpumon.core.store.runmeta import WorkloadRecord
    from tests.tracegen import cpu_run_meta

    clock = RunClock.start()
    bus = Bus()
    live = LiveStats(
        shared=tui, bus=bus
    )  # a runner keeps the overlap's rates only with --baseline runs
    bus.subscribe(NoStepsWatch(bus.publish).handle, *NoStepsWatch.TAKES)
    bus.subscribe(StaggerWatch(bus.publish, 5.0).handle, *StaggerWatch.TAKES)
    with tempfile.TemporaryDirectory() as runs:
        path = create_run_dir(Path(runs), "bench", time.localtime())
        meta = cpu_run_meta(
            "bench", clock.t0_ns, WorkloadRecord("A", spec="fcn", kind="builtin", argv=[])
        )
        recorder = Recorder(path, meta)
        recorder._stop.set()  # its writer thread ends at its next wake-up: this thread drains instead
        bus.subscribe(recorder.handle, *Recorder.TAKES)
        if tui:
            from gpumon.tui.model import LiveModel

            model = LiveModel(live=live)
            bus.subscribe(model.handle, *LiveModel.TAKES)
        for slot in ("A", "B"):
            bus.publish(WorkloadState(slot, "running", 0.0, pid=101 + (slot == "B")))
        listener = Listener(bus, clock)
        streams = {slot: _Stream(slot, "probe") for slot in ("A", "B")}
        spent = dict.fromkeys(PARTS, 0.0)
        lines = probe_lines(steps, clock.t0_ns)
        per_second = SECOND // ROWS_PER_MESSAGE
        for start in range(0, len(lines), per_second):
            t = time.thread_time()
            for slot, line in lines[start : start + per_second]:
                listener._lines(streams[slot], [line])
            spent["listener"] += time.thread_time() - t
            t = time.thread_time()
            recorder._write_pending()
            spent["recorder"] += time.thread_time() - t
            t = time.thread_time()
            live.now(start // per_second + 1.0)  # the run time those steps reached
            spent["live"] += time.thread_time() - t
        recorder.close(1.0)
    return {part: seconds / steps * 1e6 for part, seconds in spent.items()}


def measure(tree: Path, steps: int, tui: bool) -> dict[str, float]:
    env = {**os.environ, CHILD: json.dumps([steps, tui]), "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-P", str(Path(__file__).resolve())],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the child for {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--steps", type=int, default=100_000, help="steps of both jobs a measurement"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another gpumon tree, measured alternately")
    args = parser.parse_args()
    trees = ([("before", args.before.resolve())] if args.before else []) + [("this", ROOT)]
    print(
        f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}; {args.steps} steps a "
        f"measurement, µs a step (thread CPU)"
    )
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        for front in ("runner", "TUI"):
            for name, tree in trees:
                got = measure(tree, args.steps, front == "TUI")
                results.setdefault((front, name), []).append(got)
                parts = "   ".join(f"{p} {got[p]:5.2f}" for p in PARTS)
                print(
                    f"round {round_ + 1}  {front:6} {name:6}  {parts}   total {sum(got.values()):5.2f}"
                )
    for front in ("runner", "TUI"):
        medians = {
            name: {p: statistics.median(r[p] for r in results[(front, name)]) for p in (*PARTS,)}
            for name, _ in trees
        }
        line = "   ".join(f"{p} {medians['this'][p]:5.2f}" for p in PARTS)
        total = sum(medians["this"].values())
        print(f"median {front:6}: {line}   total {total:5.2f} µs a step")
        if args.before:
            before = sum(medians["before"].values())
            ratios = "   ".join(
                f"{p} {medians['this'][p] / medians['before'][p]:.2f}" for p in PARTS
            )
            print(f"        after ÷ before: {ratios}   total {total / before:.2f}")


if __name__ == "__main__":
    if CHILD in os.environ:
        steps, tui = json.loads(os.environ[CHILD])
        print(json.dumps(child(steps, tui)))
    else:
        main()
