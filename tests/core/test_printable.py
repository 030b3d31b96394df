"""Text from records reaches the terminal with its control characters escaped, on every output path."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpumon.analysis.compare import compare
from gpumon.analysis.text import render_tables
from gpumon.commands.runs import entry_line
from gpumon.core.records.printable import printable
from gpumon.core.store.trace import load_run, summarize
from gpumon.frontends.headless import emit
from tests.tracegen import Job, write_run

HOSTILE = st.lists(
    st.sampled_from(["\x1b", "[2J", "\r", "\n", "\x07", "\x9b", "\u202e", "\ud800", "é", "x", " "]),
    min_size=1,
    max_size=8,
).map("".join) | st.text(max_size=12)


def _printable_lines(lines: list[str]) -> None:
    for line in lines:
        assert line.isprintable(), repr(line)


@given(st.text())
def test_printable_leaves_no_raw_control_character_and_keeps_printable_text(text):
    shown = printable(text)
    assert shown.isprintable()
    if text.isprintable():
        assert shown == text
    shown.encode("utf-8")  # a lone surrogate cannot reach a UTF-8 terminal raw either


def test_printable_names_what_it_escaped():
    assert printable("a\x1b[31mred\x07\r\n\t\u202eé日本") == "a\\e[31mred\\x07\\r\\n\\t\\u202eé日本"


HOSTILE_TEXT = "\x1b[2J\x1b]0;owned\x07\r\u202eevil\ud800"


def test_runs_and_compare_print_a_hostile_label_and_spec_escaped(tmp_path):
    fcn, gemm = f"fcn:preset=tiny,x={HOSTILE_TEXT}", f"gemm:preset=tiny,y={HOSTILE_TEXT}"
    label = f"lab{HOSTILE_TEXT}el"
    xa = write_run(tmp_path / "xa", [Job("A", fcn, phases=((12, 0.1),))], label=label)
    xb = write_run(tmp_path / "xb", [Job("A", gemm, phases=((12, 0.05),))], label=label)
    ab = write_run(
        tmp_path / "ab",
        [Job("A", fcn, phases=((12, 0.2),)), Job("B", gemm, phases=((12, 0.1),))],
        label=label,
    )
    runs = [load_run(p) for p in (xa, xb, ab)]
    lines = [entry_line(summarize(run)) for run in runs]
    _printable_lines(lines)
    assert "\\e[2J" in lines[-1], "the spec is shown, escaped"
    table = render_tables(compare(runs[:2], runs[2:]))
    _printable_lines(table)
    assert any("\\e[2J" in line for line in table)


@given(HOSTILE)
def test_a_headless_line_is_printed_escaped(text):
    class Stream:
        written = ""

        def write(self, s: str) -> None:
            Stream.written += s

        def flush(self) -> None:
            pass

    emit(f"A: {text}", Stream())  # type: ignore[arg-type]
    _printable_lines(Stream.written.splitlines())
