"""Parent start-up: time and memory of gpumon's entry points against a bare interpreter, which heavy
libraries each loads, and what each deferred import saves. Prints figures measured in this run; asserts nothing.

    python benchmarks/startup.py [--repeats 7]   # the entry points (gpumon --help, runs, the TUI, the probe...)
    python benchmarks/startup.py --deferred      # each kept function-level import: the path with it at the top
    python benchmarks/startup.py --compare       # compare of a big capture: the scipy helper, the teardown skip

``--deferred`` runs a path, then times importing the deferred module in the same process (wall and CPU), which is
what the path would pay if the import stood at the top of its module. ``--compare`` writes a big staggered pair
(benchmarks/scale.py's capture, finalised as the recorder does) under a temporary folder and times
``gpumon compare --shared`` with the scipy helper process and without it (``HELPER_BYTES`` out of reach),
and with the interpreter's teardown skipped (the ``gpumon`` program) and run (``main`` returning).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import FIRST_FRAME  # noqa: E402

# The runs ``gpumon runs`` lists and ``predict`` reads: copied into a temporary folder (readers may cache there).
RUNS = Path(tempfile.mkdtemp(prefix="gpumon-startup-runs-"))
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "textual", "torch", "ray", "plotext")
HEAVY += ("prometheus_client", "pynvml", "psutil")
REPORT = (
    "import json, resource, sys; print(json.dumps({{'heavy': [m for m in {heavy!r} if m in sys.modules], "
    "'maxrss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}), file=sys.__stdout__)"
)
# ``gpumon ARGS`` as the program runs it, its output discarded, then the report (stdout is for the report).
GPUMON = (
    "import contextlib, io, sys\nfrom gpumon.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    "    try:\n        main({argv!r})\n    except SystemExit:\n        pass\n"
)
CASES = {
    "python -c pass": "pass",
    "import gpumon.probe (a training script)": "import gpumon.probe",
    "import gpumon.cli": "import gpumon.cli",
    "gpumon --help": GPUMON.format(argv=["--help"]),
    "gpumon run --help": GPUMON.format(argv=["run", "--help"]),
    "gpumon runs (7 runs)": GPUMON.format(argv=["runs", str(RUNS)]),
    "gpumon predict (2 solo runs, --share all)": GPUMON.format(
        argv=["predict", "--exclusive", str(RUNS / "x-fcn"), "--exclusive", str(RUNS / "x-gemm")]
        + ["--share", "all"]
    ),
    "gpumon compare (a pair, 3 small runs)": GPUMON.format(
        argv=["compare", "--exclusive", str(RUNS / "x-fcn"), "--exclusive", str(RUNS / "x-gemm")]
        + ["--shared", str(RUNS / "s-gemm+fcn")]
    ),
    "gpumon run parser + plan": (
        "from gpumon.cli import build_parser; from gpumon.frontends.plan import make_plan; "
        "from gpumon.core.capture.session import SessionConfig; "
        "make_plan(['fcn', 'lstm'], [], session=SessionConfig(), label=None, duration_s=1, stagger_s=0)"
    ),
    "gpumon session (no NVML)": (
        "from gpumon.core.capture.session import Session, SessionConfig; s = Session(SessionConfig(nvml=False)); "
        "s.start(); s.shutdown()"
    ),
    "the monitor's first frame (TUI)": FIRST_FRAME.format(then="        pass"),
    "import torch (what children pay)": "import torch",
}
# (path, module a function imports): what importing the module adds once the path has run, i.e. what the path
# would pay with the import at the top of its module (the comment: where the deferred import stands).
DEFERRED = (
    ("gpumon --help", "gpumon.workloads.spec"),  # cli.py's hint
    ("gpumon --help", "gpumon.core.store.runstore"),  # commands/: each command's run
    ("gpumon --help", "gpumon.frontends.plan"),
    ("gpumon --help", "gpumon.tui.app"),
    ("gpumon --help", "gpumon.analysis.compare"),
    ("gpumon --help", "gpumon.experiments.runner.spec"),
    ("gpumon --help", "gpumon.checks.doctor"),
    ("gpumon --help", "gpumon.core.sources.nvml"),
    ("gpumon --help", "gpumon.analysis.distributions"),  # analysis/stats_helper.py
    ("gpumon --help", "pynvml"),  # core/jobs/devices.py
    ("gpumon runs (7 runs)", "numpy"),  # core/store/trace.py, tablecheck.py
    ("gpumon runs (7 runs)", "pandas"),  # core/store/trace.py, exportcolumns.py
    ("gpumon predict (2 solo runs, --share all)", "pandas"),  # analysis/compare.py
    ("gpumon compare (a pair, 3 small runs)", "plotext"),  # analysis/text.py
    ("gpumon compare (a pair, 3 small runs)", "matplotlib.figure"),  # analysis/report.py (--report)
    ("gpumon session (no NVML)", "numpy"),  # core/interference/evidence.py
    ("the monitor's first frame (TUI)", "gpumon.analysis.predict"),  # tui/controller.py
    ("the monitor's first frame (TUI)", "gpumon.tui.screens.compare"),  # tui/screens/runs.py
    ("import gpumon.probe (a training script)", "socket"),  # core/probing/probe.py
    ("python -c pass", "gpumon.core.probing.probe"),  # core/probing/autoprobe/sitecustomize.py
)


def timed(code: str, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``python -c code`` in a fresh process, and what it printed."""
    before = os.times()
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - began
    after = os.times()
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    cpu = (
        after.children_user - before.children_user + after.children_system - before.children_system
    )
    return wall, cpu, out.stdout


def measure(
    code: str, repeats: int, env: dict[str, str] | None = None
) -> tuple[float, float, dict]:
    """Median wall and CPU seconds of ``python -c code`` in a fresh process, and its last report."""
    walls, cpus, last = [], [], {}
    for _ in range(repeats):
        wall, cpu, out = timed(code + "\n" + REPORT.format(heavy=HEAVY), env)
        walls.append(wall)
        cpus.append(cpu)
        last = json.loads(out.strip().splitlines()[-1])
    return statistics.median(walls), statistics.median(cpus), last


def entry_points(repeats: int) -> None:
    results = {name: measure(code, repeats) for name, code in CASES.items()}
    base = results["python -c pass"][0]
    print(
        f"{'case':<44} {'wall s':>7} {'x python':>8} {'CPU s':>6} {'RSS MiB':>8}  heavy modules loaded"
    )
    for name, (wall, cpu, info) in results.items():
        heavy = " ".join(info["heavy"]) or "-"
        print(
            f"{name:<44} {wall:7.3f} {wall / base:8.1f} {cpu:6.3f} {info['maxrss_mib']:8.0f}  {heavy}"
        )


MARGINAL = (
    "import time as _t\n_w, _c = _t.perf_counter(), _t.process_time()\nimport {module}\n"
    "print(_t.perf_counter() - _w, _t.process_time() - _c, file=sys.__stdout__)\n"
)


def deferred(repeats: int) -> None:
    """Each (path, module): what importing the module adds once the path has run (wall and CPU, in-process)."""
    print(
        f"{'path':<44} {'module imported after it':<34} {'+wall s':>8} {'+CPU s':>7}  heavy it adds"
    )
    for path, module in DEFERRED:
        code = "import sys\n" + CASES[path] + "\n" + MARGINAL.format(module=module)
        walls, cpus, added = [], [], set()
        for _ in range(repeats):
            lines = timed(code + REPORT.format(heavy=HEAVY))[2].strip().splitlines()
            wall, cpu = map(float, lines[-2].split())
            walls.append(wall)
            cpus.append(cpu)
            added = set(json.loads(lines[-1])["heavy"])
        before = measure(CASES[path], 1)[2]["heavy"]
        heavy = " ".join(sorted(added - set(before))) or "-"
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"{path:<44} {module:<34} {wall:8.3f} {cpu:7.3f}  {heavy}")


NO_HELPER = "import gpumon.analysis.stats_helper as h; h.HELPER_BYTES = 1 << 62\n"
PROGRAM = "import sys\nfrom gpumon.cli import console\nsys.argv[1:] = {argv!r}\nconsole()\n"
RETURNS = "import sys\nfrom gpumon.cli import main\nsys.exit(main({argv!r}))\n"


def big_compare(repeats: int, steps: int) -> None:
    """``gpumon compare --shared`` of a big capture: the scipy helper and the teardown skip, each on and off."""
    from benchmarks.scale import finalise, make_capture

    tmp = Path(tempfile.mkdtemp(prefix="gpumon-startup-"))
    try:
        run_dir = make_capture(tmp / "capture", steps)
        finalise(run_dir)
        argv = ["compare", "--shared", str(run_dir)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUMON_CACHE_DIR": str(tmp / "cache")}
        mib = (run_dir / "steps.csv").stat().st_size / 2**20
        print(
            f"a staggered pair of {steps:,} steps (steps.csv {mib:.0f} MiB); {repeats} runs each, medians"
        )
        cases = {
            "gpumon compare (helper, teardown skipped: as shipped)": PROGRAM.format(argv=argv),
            "gpumon compare, no helper (scipy.stats imported here)": NO_HELPER
            + PROGRAM.format(argv=argv),
            "gpumon compare, interpreter teardown run": RETURNS.format(argv=argv),
        }
        timed(cases[next(iter(cases))], env)  # warm-up: the files in the page cache
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(repeats):  # alternating, so that a change in the load meets every case
            for name, code in cases.items():
                rows[name].append(timed(code, env)[:2])
        shipped = statistics.median(w for w, _ in rows[next(iter(cases))])
        for name, runs in rows.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{name:<58} wall {wall:6.2f} s ({wall / shipped:4.2f}x)  CPU {cpu:6.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--deferred", action="store_true", help="what each kept deferred import saves"
    )
    parser.add_argument(
        "--compare", action="store_true", help="the scipy helper and the teardown skip"
    )
    parser.add_argument(
        "--steps", type=int, default=700_000, help="--compare: steps of the capture"
    )
    args = parser.parse_args()
    shutil.copytree(ROOT / "tests" / "data" / "h100_q4", RUNS, dirs_exist_ok=True)
    os.environ["GPUMON_CACHE_DIR"] = str(RUNS.with_name(RUNS.name + "-cache"))
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {sys.version.split()[0]}")
    if args.compare:
        big_compare(args.repeats, args.steps)
    elif args.deferred:
        deferred(args.repeats)
    else:
        entry_points(args.repeats)
    shutil.rmtree(RUNS, ignore_errors=True)
    shutil.rmtree(os.environ["GPUMON_CACHE_DIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
