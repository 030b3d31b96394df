"""``gpumon compare`` as a real subprocess on synthetic run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import gpumon
from tests.tracegen import Job, write_run

FCN = "fcn:preset=tiny"
LSTM = "lstm:preset=tiny"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "xa": write_run(
            root / "xa",
            [Job("A", FCN, phases=((20, 0.1),), warmup=3, copy_bytes=10**6, copy_s=0.001)],
        ),
        "xb": write_run(root / "xb", [Job("A", LSTM, phases=((20, 0.05),), warmup=3)]),
        "ab": write_run(
            root / "ab",
            [
                Job("A", FCN, phases=((20, 0.2),), warmup=3, copy_bytes=10**6, copy_s=0.002),
                Job("B", LSTM, phases=((20, 0.1),), warmup=3),
            ],
        ),
        "apart": write_run(
            root / "apart",
            [Job("A", FCN, phases=((8, 0.2),)), Job("B", LSTM, start=9.0, phases=((20, 0.1),))],
        ),
        "vgg": write_run(root / "vgg", [Job("A", "vgg19:preset=tiny", phases=((20, 0.1),))]),
    }


def args(
    runs: dict[str, Path],
    *extra: str,
    exclusive: tuple[str, str] = ("xa", "xb"),
    shared: str = "ab",
) -> list[str]:
    """``compare`` of the two ``exclusive`` runs and the ``shared`` one (names of the ``runs`` fixture)."""
    solo = [arg for name in exclusive for arg in ("--exclusive", str(runs[name]))]
    return ["compare", *solo, "--shared", str(runs[shared]), *extra]


def test_text_output_without_ansi_when_piped(runs: dict[str, Path]) -> None:
    result = gpumon(*args(runs))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "slowdown r [95% CI]" in out and "2.00 [2.00, 2.00]" in out
    assert "STP 1.00" in out and "cannot tell" in out
    assert "copy bandwidth (GB/s)" in out and "Caution" in out
    assert "\x1b[" not in out and result.stderr == ""


def test_json_has_slowdown_and_stp(runs: dict[str, Path]) -> None:
    result = gpumon(*args(runs, "--json"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["workloads"]["A"]["slowdown"]["estimate"] == pytest.approx(2.0, abs=1e-6)
    assert data["workloads"]["B"]["slowdown"]["estimate"] == pytest.approx(2.0, abs=1e-6)
    assert data["pair"]["stp"]["estimate"] == pytest.approx(1.0, abs=1e-6)
    assert {"low", "high"} <= set(data["pair"]["stp"]) and data["pair"]["verdict"] == "cannot tell"


def test_report_writes_markdown_json_csvs_and_pngs(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = gpumon(*args(runs, "--report", str(out)))
    assert result.returncode == 0, result.stderr
    names = {p.name for p in out.iterdir()}
    assert {
        "report.md",
        "summary.json",
        "rates.csv",
        "pair.csv",
        "distributions.csv",
        "windows.csv",
        "rate_over_time.csv",
        "rate_over_time.png",
        "copy_bandwidth.png",
        "utilisation.png",
        "slowdown.png",
    } <= names
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| A | fcn:preset=tiny |" in (out / "report.md").read_text()
    assert json.loads((out / "summary.json").read_text())["pair"]["stp"][
        "estimate"
    ] == pytest.approx(1.0)
    assert (
        (out / "rates.csv")
        .read_text()
        .startswith("workload,spec,exclusive_rate,shared_rate,slowdown,")
    )


def test_a_second_report_into_the_same_folder_needs_force(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    assert gpumon(*args(runs, "--report", str(out))).returncode == 0
    (out / "report.md").write_text("my notes")
    again = gpumon(*args(runs, "--report", str(out)))
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.count("\n") == 1 and "already exists: not replaced (--force" in again.stderr
    assert (out / "report.md").read_text() == "my notes", "nothing replaced without --force"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")], "no temporary left"
    forced = gpumon(*args(runs, "--report", str(out), "--force"))
    assert forced.returncode == 0, forced.stderr
    assert "| A | fcn:preset=tiny |" in (out / "report.md").read_text()


@pytest.mark.parametrize("force", [False, True])
def test_a_symlinked_report_is_refused_in_one_line_and_its_target_untouched(
    runs: dict[str, Path], tmp_path: Path, force: bool
) -> None:
    out = tmp_path / "report"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (out / "report.md").symlink_to(victim)
    result = gpumon(*args(runs, "--report", str(out), *(["--force"] if force else [])))
    assert result.returncode == 2 and result.stdout == ""
    assert (
        result.stderr
        == f"gpumon: error: {out / 'report.md'} is a symbolic link: not written through\n"
    )
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in out.iterdir()) == ["report.md"], "nothing else written either"


def test_help_explains_flags_and_definitions() -> None:
    result = gpumon("compare", "--help")
    assert result.returncode == 0
    for text in (
        "--exclusive",
        "--shared",
        "--report",
        "--json",
        "overlap window",
        "STP",
        "slowdown r",
    ):
        assert text in result.stdout


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "no such run directory"),
        ("corrupt", "corrupt (not valid JSON)"),
        ("no_overlap", "no overlap"),
        ("mismatched", "matches neither shared workload"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    runs: dict[str, Path], tmp_path: Path, case: str, message: str
) -> None:
    if case == "missing":
        argv = ["compare", "--exclusive", str(tmp_path / "nope"), "--shared", str(runs["ab"])]
    elif case == "corrupt":
        bad = tmp_path / "bad"
        bad.mkdir()
        (bad / "run.json").write_text("{not json")
        argv = ["compare", "--exclusive", str(runs["xa"]), "--shared", str(bad)]
    elif case == "no_overlap":
        argv = args(runs, shared="apart")
    else:
        argv = args(runs, exclusive=("vgg", "xb"))
    result = gpumon(*argv)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpumon: error: ") and message in lines[0], (
        result.stderr
    )
    assert "Traceback" not in result.stderr and result.stdout == ""


TEARDOWN_WITNESS = """
import atexit, sys
atexit.register(lambda: print("teardown ran", flush=True))
sys.argv[1:] = {argv!r}
from gpumon.cli import console
console()
"""


@pytest.mark.parametrize(
    ("argv", "tears_down"), [("compare", False), ("compare-bad", False), ("runs", True)]
)
def test_compare_skips_the_interpreters_teardown_once_it_has_answered_or_refused(
    runs: dict[str, Path], tmp_path: Path, argv: str, tears_down: bool
) -> None:
    """compare's output or its one-line error is flushed and its exit skips the teardown (atexit included); other
    commands end as usual."""
    import subprocess
    import sys

    if argv == "compare":
        command = args(runs, "--json")
    elif argv == "compare-bad":
        command = ["compare", "--exclusive", str(tmp_path / "nope"), "--shared", str(runs["ab"])]
    else:
        command = ["runs", str(runs["xa"].parent)]
    code = TEARDOWN_WITNESS.format(argv=command)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == (2 if argv == "compare-bad" else 0), result.stderr
    assert ("teardown ran" in result.stdout) is tears_down
    if argv == "compare":
        assert json.loads(result.stdout)["pair"]["stp"]["estimate"] == pytest.approx(1.0)
