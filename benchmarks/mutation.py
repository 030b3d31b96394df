"""Mutation score of gpumon's logic modules: mutmut changes the code, the fast tests that cover it must fail.

Each module in ``MODULES`` is mutated on its own (mutmut 3: every function rewritten with its mutants
side by side, one chosen per forked test run) and checked against the fast tests listed beside it,
never the e2e suite (too slow: a mutant's tests run once per mutant). A mutant is *killed* when a
test fails (or the tests time out), *survives* when every test passes, and has *no tests* when no
listed test calls its function (counted as a survivor). Mutants that cannot change behaviour are
*equivalent*: listed with the reason in ``benchmarks/mutation_equivalent.toml`` and left out of the
score. The score is killed / (mutants - equivalent).

    python benchmarks/mutation.py                      # every module (hours on the 2-core VM: docs/testing.md)
    python benchmarks/mutation.py core.records.rates   # one module (or several; --list names them)
    python benchmarks/mutation.py --report --markdown  # no run: the last results, as docs/testing.md's tables

Needs ``pip install -e '.[mutation]'``. Work directories go to ``build/mutation/<module>/`` (the
project's ``gpumon/`` and ``tests/`` linked, a pyproject with the module's mutmut settings);
``survivors.txt`` there holds each surviving mutant's diff. Exit status 0 when every module run
reaches ``--target`` (default 90 %), 1 otherwise, 2 on bad arguments. Not in CI: it is slow, and
its figure is recorded in docs/testing.md with the machine it was measured on.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutation"
EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent.toml"
KILLED = {"killed", "timeout", "caught by type check"}
UNCHECKED = "not checked"  # a run stopped before it reached the mutant

CORE = "tests/core/"
TUI = "tests/tui/"


@dataclass(frozen=True)
class Target:
    """One module to mutate and the fast tests that must catch its mutants."""

    path: str
    tests: tuple[str, ...]


MODULES: dict[str, Target] = {
    "core.records.rates": Target(
        "gpumon/core/records/rates.py",
        (
            CORE + "test_rates_edges.py",
            CORE + "test_rates.py",
            CORE + "test_analysis.py",
            CORE + "test_compare_reads.py",
            CORE + "test_pipeline_live.py",
            CORE + "test_sentence.py",
            TUI + "test_model.py",
            TUI + "test_interference_line.py",
        ),
    ),
    "analysis.rates": Target(
        "gpumon/analysis/rates.py",
        (
            CORE + "test_analysis_rates.py",
            CORE + "test_rates.py",
            CORE + "test_analysis.py",
            CORE + "test_compare_reads.py",
        ),
    ),
    "analysis.slowdown": Target(
        "gpumon/analysis/slowdown.py",
        (
            CORE + "test_intervals_exact.py",
            CORE + "test_analysis.py",
            CORE + "test_spread.py",
            CORE + "test_experiments_share.py",
        ),
    ),
    "analysis.compare": Target(
        "gpumon/analysis/compare.py",
        (
            CORE + "test_compare_exact.py",
            CORE + "test_analysis.py",
            CORE + "test_compare_reads.py",
            CORE + "test_compare_bounded.py",
            CORE + "test_compare_stages.py",
            CORE + "test_attribution.py",
        ),
    ),
    "analysis.spread": Target(
        "gpumon/analysis/spread.py", (CORE + "test_intervals_exact.py", CORE + "test_spread.py")
    ),
    "analysis.predict_model": Target(
        "gpumon/analysis/predict_model.py",
        (
            CORE + "test_predict.py",
            CORE + "test_predict_crowded.py",
            CORE + "test_predict_phase.py",
        ),
    ),
    "analysis.predict_phase": Target(
        "gpumon/analysis/predict_phase.py",
        (CORE + "test_predict_phase.py", CORE + "test_predict.py"),
    ),
    "core.store.recorder": Target(
        "gpumon/core/store/recorder.py",
        (
            CORE + "test_roundtrip.py",
            CORE + "test_recorder_errors.py",
            CORE + "test_pipeline_recorder.py",
            CORE + "test_follow.py",
            CORE
            + "test_columnar.py",  # the columnar copy and run.json's summary, written at finalise
            CORE + "test_recorder_notes.py",  # its notices, a failed copy's warning, initial_meta
            CORE + "test_step_batches.py",  # steps.csv's lines against the csv module's
        ),
    ),
    # The reader's own tests; not test_trace_fuzz.py (hypothesis through the CLI, 11 s a mutant) nor test_analysis.py
    # (the analysis', 8 s): every mutant of a function they call ran them (a run with them, stopped after 14 minutes,
    # had checked 415 of 835 mutants and was doing 10 a minute).
    "core.store.trace": Target(
        "gpumon/core/store/trace.py",
        (
            CORE + "test_trace_reader.py",
            CORE + "test_roundtrip.py",
            CORE + "test_trace.py",
            CORE + "test_columnar.py",
            CORE + "test_compare_reads.py",
            CORE
            + "test_trace_summary_chunks.py",  # summary_of's cache, row-group reads, streamed export
            CORE + "test_export_columns.py",
            CORE + "test_trace_fuzz.py",  # damaged tables listed and exported
            CORE + "test_writers_hostile.py",
            CORE + "test_hostile_fresh.py",  # export into the run it reads
        ),
    ),
    "core.store.runner": Target(
        "gpumon/core/store/runner.py",
        (CORE + "test_runner_edges.py", CORE + "test_runner.py", CORE + "test_follow.py"),
    ),
    # stop_runner, moved out of core/store/runner.py (nothing under core/store signals)
    "core.jobs.runnerstop": Target("gpumon/core/jobs/runnerstop.py", (CORE + "test_runner.py",)),
    # The PCIe readers, in the test's own process (the fake libnvidia-ml loaded there: tests/fakenvml/inprocess.py);
    # tests/core/test_nvml.py's children are invisible to mutmut (it sees which test calls a function, and swaps it,
    # in the test's process only).
    "core.sources.nvmlpcie": Target(
        "gpumon/core/sources/nvmlpcie.py", (CORE + "test_nvmlpcie.py",)
    ),
    "core.sources.nvmlquery": Target(
        "gpumon/core/sources/nvmlquery.py",
        (CORE + "test_nvmlquery.py", CORE + "test_nvmlpcie.py", CORE + "test_nvml_between.py"),
    ),
    "core.sources.nvmlprocs": Target(
        "gpumon/core/sources/nvmlprocs.py", (CORE + "test_nvmlprocs.py",)
    ),
    "core.jobs.beside": Target("gpumon/core/jobs/beside.py", (CORE + "test_beside_target.py",)),
    # Being refactored on the arch/firsthour branches: configured, re-run after the merge.
    "tui.widgets.interference": Target(
        "gpumon/tui/widgets/interference.py",
        (
            TUI + "test_interference_line.py",
            TUI + "test_cause_line.py",
            TUI + "test_widget_text.py",
        ),
    ),
    "tui.widgets.lines": Target(
        "gpumon/tui/widgets/lines.py",
        (TUI + "test_lines.py", TUI + "test_widget_text.py", TUI + "test_device_panel.py"),
    ),
    "tui.widgets.gpus": Target(
        "gpumon/tui/widgets/gpus.py", (TUI + "test_gpus.py", TUI + "test_widget_text.py")
    ),
    "tui.widgets.processes": Target(
        "gpumon/tui/widgets/processes.py", (TUI + "test_widget_text.py",)
    ),
    "tui.widgets.probed": Target(
        "gpumon/tui/widgets/probed.py", (TUI + "test_widget_text.py", TUI + "test_probed.py")
    ),
    "tui.widgets.device": Target(
        "gpumon/tui/widgets/device.py",
        (TUI + "test_device_text.py", TUI + "test_device_panel.py", TUI + "test_widget_text.py"),
    ),
    "tui.widgets.graph": Target(
        "gpumon/tui/widgets/graph.py",
        (TUI + "test_model.py", TUI + "test_widget_text.py", TUI + "test_time_axis.py"),
    ),
}


@dataclass
class Mutant:
    name: str
    status: str
    diff: str = ""

    @property
    def function(self) -> str:
        """mutmut's name of the mutated function, without the mutant's number (stable while the function is)."""
        return re.sub(r"__mutmut_\d+$", "", self.name.rsplit(".", 1)[-1])

    def changed(self) -> tuple[str, str]:
        """The lines the mutant removed and added, stripped: what an equivalence entry names."""
        lines = self.diff.splitlines()[3:]  # after the title and the ---/+++ header
        removed = "\n".join(line[1:].strip() for line in lines if line.startswith("-"))
        added = "\n".join(line[1:].strip() for line in lines if line.startswith("+"))
        return removed, added


@dataclass
class Score:
    module: str
    mutants: list[Mutant] = field(default_factory=list)
    equivalent: list[tuple[Mutant, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def killed(self) -> int:
        return sum(m.status in KILLED for m in self.mutants)

    @property
    def unchecked(self) -> int:
        return sum(m.status == UNCHECKED for m in self.mutants)

    @property
    def survivors(self) -> list[Mutant]:
        equivalent = {m.name for m, _ in self.equivalent}
        return [
            m
            for m in self.mutants
            if m.status not in (*KILLED, UNCHECKED) and m.name not in equivalent
        ]

    @property
    def counted(self) -> int:
        """The mutants that count: checked and not equivalent."""
        return len(self.mutants) - len(self.equivalent) - self.unchecked

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.counted if self.counted else 100.0


def equivalents() -> dict[tuple[str, str, str, str], str]:
    """(module, function, removed, added) → why the mutant cannot change what the module does."""
    entries = (
        tomllib.loads(EQUIVALENT.read_text()).get("equivalent", []) if EQUIVALENT.exists() else []
    )
    return {
        (e["module"], e["function"], e["removed"].strip(), e["added"].strip()): e["why"]
        for e in entries
    }


def pyproject(target: Target) -> str:
    """The work directory's pyproject: the project's pytest settings and this module's mutmut settings."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in project["tool"]["pytest"]["ini_options"].items()]
    lines += [
        "",
        "[tool.mutmut]",
        'source_paths = ["gpumon"]',
        f"only_mutate = {json.dumps([target.path])}",
        f"pytest_add_cli_args_test_selection = {json.dumps(list(target.tests))}",
        # a test that waits on a subprocess can take seconds: give each mutant's tests room before a timeout
        "timeout_multiplier = 5.0",
        "timeout_constant = 10.0",
    ]
    return "\n".join(lines) + "\n"


def mutmut(work: Path, *args: str, log: Path | None = None) -> str:
    cmd = [sys.executable, "-m", "mutmut", *args]
    if log is None:
        return subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=True).stdout
    with log.open("w") as out:
        done = subprocess.run(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(
            f"mutmut {' '.join(args)} exited with {done.returncode} (log: {log}):\n{tail}"
        )
    return ""


def run_module(module: str, jobs: int) -> float:
    """Mutate ``module`` in a fresh work directory against its tests; the seconds it took."""
    target = MODULES[module]
    work = WORK / module
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in ("gpumon", "tests"):
        (work / name).symlink_to(ROOT / name)
    (work / "pyproject.toml").write_text(pyproject(target))
    started = time.monotonic()
    dotted = target.path.removesuffix(".py").replace("/", ".")
    mutmut(work, "run", "--max-children", str(jobs), f"{dotted}.*", log=work / "mutmut.log")
    seconds = time.monotonic() - started
    (work / "seconds").write_text(f"{seconds:.0f}\n")
    return seconds


def read_score(module: str, known: dict[tuple[str, str, str, str], str]) -> Score | None:
    """The results of the last run of ``module`` (None if it has none), equivalents matched, survivors written out."""
    work = WORK / module
    if not (work / "mutants").exists():
        return None
    done = (
        work / "seconds"
    )  # absent: the run was stopped (or is still going), the score is of what it checked
    score = Score(module, seconds=float(done.read_text()) if done.exists() else math.nan)
    for line in mutmut(work, "results", "--all", "true").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            score.mutants.append(Mutant(name, status))
    for mutant in score.mutants:
        if mutant.status not in (*KILLED, UNCHECKED):
            mutant.diff = mutmut(work, "show", mutant.name)
            why = known.get((module, mutant.function, *mutant.changed()))
            if why is not None:
                score.equivalent.append((mutant, why))
    with (work / "survivors.txt").open("w") as out:
        for mutant in score.survivors:
            out.write(f"{mutant.diff.rstrip()}\n\n")
    return score


def _partial(score: Score) -> str:
    return (
        f"; PARTIAL: {score.unchecked} of {len(score.mutants)} not checked"
        if score.unchecked
        else ""
    )


def report(score: Score) -> None:
    print(
        f"{score.module}: {score.score:.1f} % ({score.killed} killed of {score.counted} mutants; "
        f"{len(score.equivalent)} equivalent left out; {len(score.survivors)} survivors{_partial(score)}) "
        f"in {score.seconds:.0f} s"
    )
    for mutant in score.survivors:
        removed, added = mutant.changed()
        print(f"  {mutant.status}: {mutant.name}\n      - {removed}\n      + {added}")


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("\n", " ⏎ ").replace("`", "'") + "`"


def markdown(scores: list[Score]) -> None:
    """The tables of docs/testing.md: scores, equivalent mutants, survivors."""
    print("\n| module | mutants | killed | equivalent | survivors | score | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s in scores:
        print(
            f"| `{s.module}` | {len(s.mutants)}{f' ({s.unchecked} not checked)' if s.unchecked else ''} | "
            f"{s.killed} | {len(s.equivalent)} | {len(s.survivors)} | {s.score:.1f} %{' (partial)' if s.unchecked else ''} | "
            f"{s.seconds:.0f} |"
        )
    print(
        "\n| module | function | mutant (removed → added) | why it is equivalent |\n| --- | --- | --- | --- |"
    )
    for s in scores:
        for mutant, why in s.equivalent:
            removed, added = mutant.changed()
            print(
                f"| `{s.module}` | `{mutant.function}` | {_cell(removed)} → {_cell(added)} | {why} |"
            )
    print("\n| module | mutant | status | removed → added |\n| --- | --- | --- | --- |")
    for s in scores:
        for mutant in s.survivors:
            removed, added = mutant.changed()
            print(
                f"| `{s.module}` | `{mutant.name.rsplit('.', 1)[-1]}` | {mutant.status} | "
                f"{_cell(removed)} → {_cell(added)} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "modules", nargs="*", metavar="MODULE", help="modules to mutate (default: all; --list)"
    )
    parser.add_argument(
        "--list", action="store_true", help="print the modules and their tests, then exit"
    )
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument(
        "--target", type=float, default=90.0, help="score each module must reach (default 90)"
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the scores, equivalent mutants and survivors as Markdown tables too",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="do not run: report the last results of the modules (default: every one that has some)",
    )
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)} (one of: {', '.join(MODULES)})")
    if args.list:
        for name, target in MODULES.items():
            print(f"{name}: {target.path} <- {' '.join(target.tests)}")
        return 0
    missing = [
        t for m in args.modules or MODULES for t in MODULES[m].tests if not (ROOT / t).exists()
    ]
    if missing:
        parser.error(f"test file(s) not found: {', '.join(missing)}")
    known = equivalents()
    scores = []
    for module in args.modules or list(MODULES):
        if not args.report:
            run_module(module, args.jobs)
        score = read_score(module, known)
        if score is None:
            if args.modules:
                print(f"{module}: no results (run it without --report first)")
            continue
        scores.append(score)
        report(score)
    if args.markdown:
        markdown(scores)
    return 0 if scores and all(s.score >= args.target for s in scores) else 1


if __name__ == "__main__":
    sys.exit(main())
