"""The UI thread's CPU per frame of the monitor, measured in-process, and where it goes.

Run: ``python benchmarks/frame_cost.py`` (about a minute); ``--before DIR`` measures the gpumon tree at DIR too, in
alternate processes of the same run (DIR/gpumon imported instead of this tree's), and prints both and their ratio.

The real app (``ViewerApp`` with the monitor's ``ReplayScreen``, headless, 120x40 by default) shows the real H100
capture of resnet50 + vgg19 sharing a GPU (tests/data/h100, both baselines set, as tests/tui/test_h100_replay.py
does). Each frame: the replay is advanced one second of run time, the refresh thread builds the view and posts it,
and the UI thread handles it as it would live: our ``draw``, Textual's update timer, the compositor rendering what
changed. The UI thread's CPU (``time.thread_time``) is summed from when the view is asked for until the frame has
been displayed and the loop is idle again, so it holds everything the UI thread does for a frame (messages, timers,
``draw``, the compositor) and nothing the refresh thread does. Headless, Textual skips turning the compositor's update
into the terminal's bytes: this script does it, as the terminal driver would, and counts it (``terminal``).

Parts (each the UI thread's CPU inside that function, summed over the frames, per frame):
``draw`` (MonitorScreen.draw: our widgets' updates), ``compositor`` (Screen._compositor_refresh: Textual's
render_update), within it ``lines ours`` / ``lines textual`` (the render_lines of widgets whose class is gpumon's,
containers kept by ``CachedBox`` included, and of Textual's own), ``layout`` (Screen._refresh_layout; ~0 when no frame lays the screen out),
``terminal`` (the update's escape sequences), ``other`` (the rest: message dispatch, timers, idle handling).
Frames are counted once both jobs run (``--warm`` frames first: the jobs' start changes classes, a restyle of the
panels), and the collector's start-up heap is frozen first, as the live monitor does (``settle_heap``). Figures are
printed, not asserted; medians of the repetitions.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "tests" / "data" / "h100"
SHARED = "20261123-032439-s-r50-vgg"
BASELINES = {"A": "20261123-032320-x-resnet50", "B": "20261123-032346-x-vgg19"}
FIRST_T = 2.0  # the first frame's run time; each frame one second later
WAIT_S = 60.0  # a frame not displayed by then: the script fails, it does not hang
REFRESH_HZ = 50.0  # the refresh thread waits no second between frames: each frame is asked for
PARTS = ("draw", "compositor", "lines ours", "lines textual", "layout", "terminal")


class Meter:
    """The UI thread's CPU inside each wrapped function (outermost call only), and the widgets rendered."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.spent: Counter[str] = Counter()
        self.rendered: Counter[str] = Counter()
        self.by_class: Counter[str] = Counter()
        self._depth: Counter[str] = Counter()

    def wrap(self, owner: type, name: str, part: str, count: bool = False) -> None:
        original: Callable[..., Any] = owner.__dict__[name]

        def timed(obj: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self.thread or self._depth[part]:
                return original(obj, *args, **kwargs)
            if count:
                self.rendered[type(obj).__name__] += 1
            self._depth[part] += 1
            began = time.thread_time()
            try:
                return original(obj, *args, **kwargs)
            finally:
                spent = time.thread_time() - began
                self.spent[part] += spent
                if count:
                    self.by_class[type(obj).__name__] += spent
                self._depth[part] -= 1

        setattr(owner, name, timed)


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def instrument() -> Meter:
    """Wrap the functions whose CPU is reported (every widget class's own ``render_lines`` included)."""
    from textual.screen import Screen
    from textual.widget import Widget

    from gpumon.tui.screens.monitor import MonitorScreen
    import gpumon.tui.screens.replay  # noqa: F401  (its widgets' classes are defined before they are wrapped)

    meter = Meter()
    meter.wrap(MonitorScreen, "draw", "draw")
    meter.wrap(Screen, "_compositor_refresh", "compositor")
    meter.wrap(Screen, "_refresh_layout", "layout")
    for cls in {Widget, *_subclasses(Widget)}:
        if "render_lines" in cls.__dict__:
            ours = cls.__module__.startswith("gpumon")
            meter.wrap(cls, "render_lines", "lines ours" if ours else "lines textual", count=True)
    return meter


class Clock:
    """The run time the next frame shows: the refresh thread seeks the replay to it before it builds the view (the
    feed's ``gather``, as a live session reads its probes), so the UI thread does none of the replay's work."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.t = FIRST_T

    def gather(self) -> None:
        self.source.seek(self.t)


def replay_app(runs: Path) -> tuple[Any, Clock]:
    """The viewer on the shared H100 run with both baselines, not playing, a frame whenever poked; and its clock."""
    from dataclasses import replace

    from gpumon.core.store.trace import baseline_rate
    from gpumon.tui.app import ViewerApp
    from gpumon.tui.screens.replay import ReplayScreen, open_replay

    source, feed = open_replay(runs / SHARED)
    for slot, name in BASELINES.items():
        feed.model.set_baseline(slot, baseline_rate(slot, runs / name), f"baseline {name}")
    clock = Clock(source)
    feed = replace(feed, gather=clock.gather)
    return ViewerApp(ReplayScreen(source, feed, play=False, refresh_hz=REFRESH_HZ)), clock


async def measure(size: tuple[int, int], frames: int, warm: int, profile: bool) -> dict[str, Any]:
    """One app: ``warm`` frames unmeasured, then ``frames`` measured; CPU per frame by part, in ms."""
    from textual._compositor import CompositorUpdate

    meter = instrument()
    app, clock = replay_app(H100)
    displayed = asyncio.Event()
    display = app._display

    def _display(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            began = time.thread_time()
            renderable.render_segments(
                app.console
            )  # what the terminal driver writes, skipped headless
            meter.spent["terminal"] += time.thread_time() - began
            displayed.set()

    app._display = _display
    profiler = None
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        while screen.frames == 0:
            await pilot.pause()
        await pilot.pause()
        spent = 0.0
        for k in range(warm + frames):
            if k == warm:
                gc.collect()  # as the live monitor settles its heap once the session has started (settle_heap)
                gc.freeze()
                meter.spent.clear()
                meter.rendered.clear()
                meter.by_class.clear()
                first = screen.frames
                if profile:
                    import cProfile

                    profiler = cProfile.Profile()
                    profiler.enable()
            clock.t = FIRST_T + 1 + k
            drawn = screen.frames
            displayed.clear()
            began = time.thread_time()
            screen.pump.poke()
            while True:  # until the frame drawn after this poke has been displayed
                await asyncio.wait_for(displayed.wait(), WAIT_S)
                displayed.clear()
                if screen.frames != drawn:
                    break
            await asyncio.sleep(0.05)  # the frame's trailing messages (idle, callbacks) run
            if k >= warm:
                spent += time.thread_time() - began
        if profiler is not None:
            profiler.disable()
        drawn_frames = screen.frames - first
    per_frame = {part: 1000 * meter.spent[part] / drawn_frames for part in PARTS}
    total = 1000 * spent / drawn_frames
    per_frame["other"] = total - sum(
        per_frame[p] for p in ("draw", "compositor", "layout", "terminal")
    )
    result = {
        "total": total,
        "frames": drawn_frames,
        "parts": per_frame,
        "rendered": {k: v / drawn_frames for k, v in meter.rendered.items()},
        "by_class": {k: 1000 * v / drawn_frames for k, v in meter.by_class.items()},
    }
    if profiler is not None:
        import io
        import pstats

        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        result["profile"] = out.getvalue()
    return result


def child(args: argparse.Namespace) -> None:
    size = tuple(int(x) for x in args.size.split("x"))
    result = asyncio.run(measure((size[0], size[1]), args.frames, args.warm, args.profile))
    print(json.dumps(result))


def run_child(tree: Path, args: argparse.Namespace, profile: bool = False) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--size", args.size]
    argv += ["--frames", str(args.frames), "--warm", str(args.warm)]
    if profile:
        argv.append("--profile")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    med = statistics.median
    return {
        "total": med(r["total"] for r in results),
        "totals": [r["total"] for r in results],
        "parts": {p: med(r["parts"][p] for r in results) for p in (*PARTS, "other")},
        "rendered": results[-1]["rendered"],
        "by_class": {
            k: med(r["by_class"].get(k, 0.0) for r in results) for k in results[-1]["by_class"]
        },
    }


def show(name: str, s: dict[str, Any]) -> None:
    each = ", ".join(f"{t:.2f}" for t in s["totals"])
    print(f"{name}: UI thread CPU per frame {s['total']:.2f} ms (median; each: {each})")
    for part, ms in s["parts"].items():
        print(f"  {part:<14} {ms:6.2f} ms")
    widgets = ", ".join(
        f"{k} {v:g} ({1000 * s['by_class'][k]:.0f} µs)" for k, v in sorted(s["rendered"].items())
    )
    print(f"  widgets rendered a frame: {sum(s['rendered'].values()):g}: {widgets}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="120x40", help="terminal size, COLSxROWS")
    parser.add_argument("--frames", type=int, default=7, help="frames measured per repetition")
    parser.add_argument(
        "--warm",
        type=int,
        default=12,
        help="frames drawn first, not measured (both jobs run from the 12th: no state changes after)",
    )
    parser.add_argument("--repeat", type=int, default=9, help="repetitions (processes) per tree")
    parser.add_argument("--before", type=Path, help="a gpumon tree to measure too, alternately")
    parser.add_argument(
        "--profile", action="store_true", help="print cProfile's top of one more run"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.frames + args.warm > 19:
        parser.error("--frames + --warm: at most 19 (the capture is 22.5 s long)")
    if args.child:
        child(args)
        return
    trees = {"this tree": ROOT}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.repeat):
        for name, tree in trees.items():
            results[name].append(run_child(tree, args))
    print(
        f"{args.size}, {args.frames} frames after {args.warm}, {args.repeat} repetitions; load {os.getloadavg()}"
    )
    for name in trees:
        show(name, summary(results[name]))
    if args.before is not None:
        ratio = summary(results["this tree"])["total"] / summary(results["before"])["total"]
        print(f"this tree ÷ before: {ratio:.2f}")
    if args.profile:
        print(run_child(ROOT, args, profile=True)["profile"])


if __name__ == "__main__":
    main()
