"""The text the TUI's widgets draw, character by character: the GPU overview lines, the process table, the probed
line, the block graphs, the device panel's GPM and per-core lines. Each expectation is written out by hand."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text
from textual.app import App, ComposeResult

from gpumon.core.capture.probescan import Probed, ProbeScanner
from gpumon.core.records.clock import RunClock
from gpumon.core.records.model import DeviceSample, GpuSummary
from gpumon.tui.view import DeviceView, ProcessRow, Series
from gpumon.tui.widgets.device import cores_text, gpm_text
from gpumon.tui.widgets.gpus import GpuLines, render_lines
from gpumon.tui.widgets.graph import BLOCKS, LEVELS, column_codes, graph_rows
from gpumon.tui.widgets.lines import MetricRow, TextLine
from gpumon.tui.widgets.probed import ProbedLine, probed_text
from gpumon.tui.widgets.processes import ProcessTable, render_table
from tests.tui.conftest import graph_level as level, run_async

NAN = math.nan
H100 = "NVIDIA H100 80GB HBM3"


def _styles(text) -> list[tuple[str, str]]:
    return [(text.plain[s.start : s.end], str(s.style)) for s in text.spans]


def _gpus() -> tuple[GpuSummary, ...]:
    return (
        GpuSummary(
            0,
            H100,
            "GPU-0",
            DeviceSample(
                1.0, gpu_util=97.0, mem_used_mib=41984.0, mem_total_mib=81920.0, power_w=512.0
            ),
            3,
            jobs=True,
        ),
        GpuSummary(
            1,
            H100,
            "GPU-1",
            DeviceSample(
                1.0, gpu_util=5.0, mem_used_mib=512.0, mem_total_mib=81920.0, power_w=70.0
            ),
            1,
        ),
        GpuSummary(10, None, None, None, None),  # lost: no sample, processes unknown
    )


def test_gpu_lines_align_their_columns_and_mark_the_shown_gpu() -> None:
    text = render_lines(_gpus(), shown=1, width=100)
    assert text.plain.split("\n") == [
        "   0 NVIDIA H100 80GB HBM3  util 97%  mem 41.0/80 GiB  512 W  3 procs  jobs",
        "▸  1 NVIDIA H100 80GB HBM3  util  5%  mem  0.5/80 GiB   70 W   1 proc",
        "  10 GPU                    util   –  mem           –      –  ? procs  lost",
    ]
    assert _styles(text) == [  # (a line of the jobs' GPU that is not shown has no style of its own)
        ("  jobs", "bold cyan"),
        ("▸  1 NVIDIA H100 80GB HBM3  util  5%  mem  0.5/80 GiB   70 W   1 proc", "bold"),
        ("  10 GPU                    util   –  mem           –      –  ? procs", "dim"),
        ("  lost", "bold"),
    ]


def test_gpu_names_lose_the_vendor_then_their_end_when_short_of_room() -> None:
    lines = render_lines(_gpus(), shown=None, width=60).plain.split("\n")
    assert lines[0] == "   0 H100 …  util 97%  mem 41.0/80 GiB  512 W  3 procs  jobs"
    assert lines[2].startswith("  10 GPU     util")
    # the vendor stays while the longest name fits; a name of exactly the room is not cut
    fixed = len("▸ 0 " + "  util 97%  mem 41.0/80 GiB  512 W  3 procs  jobs")  # all but the name
    exact = render_lines(_gpus()[:1], shown=0, width=fixed + len(H100)).plain
    assert exact.startswith("▸ 0 " + H100 + "  util 97%")
    tight = render_lines(_gpus()[:1], shown=0, width=fixed + len(H100) - 1).plain
    assert tight.startswith("▸ 0 H100 80GB HBM3  util 97%")
    assert render_lines(_gpus()[:1], shown=0, width=10).plain.startswith(
        "▸ 0 H10…  util"
    )  # 4 characters at least


def test_a_lost_gpu_keeps_its_process_count() -> None:
    lost = GpuSummary(3, "X", None, None, 2)
    assert (
        render_lines((lost,), shown=None, width=80).plain
        == "  3 X  util –  mem –  –  2 procs  lost"
    )


def test_a_gpu_with_one_process_and_one_with_none() -> None:
    one = GpuSummary(
        0, "X", None, DeviceSample(0.0, gpu_util=0.0, mem_used_mib=100.0, mem_total_mib=512.0), 0
    )
    assert (
        render_lines((one,), shown=None, width=80).plain
        == "  0 X  util 0%  mem 100/512 MiB  –  0 procs"
    )


def _rows() -> tuple[ProcessRow, ...]:
    return (
        ProcessRow("A", 4242, "alice", 2048.0, 55.0, 97.0, 512.0, 3725.0, "python train.py", 12.5),
        ProcessRow("", 777, None, 100.0, NAN, NAN, NAN, NAN, None),
        ProcessRow("", 31337, "bob", NAN, 9.0, 150.0, 20480.0, 90061.0, "python other.py --lr 0.1"),
        ProcessRow("B", 5, None, 1023.0, 100.0, 0.0, 1024.0, 86399.0, "x", 150.0),
    )


def test_the_process_table_row_by_row() -> None:
    text = render_table(_rows(), width=200)
    assert text.plain.split("\n") == [
        "  PID     USER      GPU MEM  SM%  CPU% HOST MEM  ELAPSED   IT/S COMMAND",
        "A 4242    alice        2.0G   55    97     512M  1:02:05   12.5 python train.py",
        "  777     hidden       100M    ?     ?        ?        ?      - hidden (PID namespace)",
        "  31337   bob             ?    9   150    20.0G    1d01h      - python other.py --lr 0.1",
        "B 5       ?           1023M  100     0     1.0G 23:59:59    150 x",
    ]
    lines = text.plain.split("\n")
    assert _styles(text) == [
        (lines[0], "bold"),
        (lines[2], "dim"),
        (lines[3], "dim"),
    ]  # ours plain, others dim


def test_the_process_table_cuts_long_lines_and_rates() -> None:
    lines = render_table(_rows()[:1], width=40).plain.split("\n")
    assert lines == [
        "  PID     USER      GPU MEM  SM%  CPU% …",
        "A 4242    alice        2.0G   55    97 …",
    ]
    rates = [ProcessRow("A", 1, "u", 1.0, 1.0, 1.0, 1.0, 1.0, "c", r) for r in (99.0, 100.0, 0.05)]
    assert [line.split()[-2] for line in render_table(tuple(rates), 200).plain.split("\n")[1:]] == [
        "99.0",
        "100",
        "0.1",
    ]
    long_user = ProcessRow("", 1, "averyverylongname", 1.0, 1.0, 1.0, 1.0, 86400.0, "c")
    assert render_table((long_user,), 200).plain.split("\n")[1] == (
        "  1       averyver       1M    1     1       1M    1d00h      - c"
    )


def test_process_table_units_at_their_edges() -> None:
    def row(gpu_mib: float, elapsed: float) -> str:
        return render_table(
            (ProcessRow("A", 1, "u", gpu_mib, 1.0, 1.0, 1.0, elapsed, "c"),), 200
        ).plain.split("\n")[1]

    assert row(102400.0, 3600.0).split()[3:7] == ["100.0G", "1", "1", "1M"]
    assert row(1.0, 3600.0).split()[7] == "1:00:00" and row(1.0, 3599.0).split()[7] == "0:59:59"
    assert row(1.0, 90000.0).split()[7] == "1d01h" and row(1.0, 60.0).split()[7] == "0:01:00"
    header = render_table((), 200).plain
    assert render_table((), len(header)).plain == header  # exactly the width: not cut
    assert render_table((), len(header) - 1).plain == header[: len(header) - 2] + "…"
    assert render_table((), 0).plain == "…"


def test_the_probed_line() -> None:
    found = [Probed(4242, "python train.py", 12.5, 100), Probed(7, "x" * 50, NAN, 0)]
    text = probed_text(found)
    assert text.plain == (
        "probed, not ours: 4242 python train.py 12.5 it/s  7 "
        + "x" * 40
        + " – it/s  ·  w watches one as B"
    )
    assert str(text.style) == "dim"
    assert _styles(text)[:2] == [("4242 ", "bold"), ("12.5 it/s  ", "cyan")]
    assert _styles(text)[-1] == ("·  w watches one as B", "dim")
    assert probed_text([]).plain == "probed, not ours: ·  w watches one as B"


def test_graph_levels_in_eighths_of_a_cell() -> None:
    assert level(NAN, 10, 1) == -1
    assert level(5.0, 0.0, 1) == 0 and level(-1.0, 10, 1) == 0 and level(0.0, 10, 1) == 0
    assert level(0.01, 10, 1) == 1  # something: at least one eighth
    assert level(5.0, 10, 1) == 4 and level(10.0, 10, 1) == 8 and level(20.0, 10, 1) == 8
    assert level(5.0, 10, 2) == 8 and level(10.0, 10, 2) == 16
    assert level(0.25, 0.5, 1) == 4  # a scale under one
    assert (
        column_codes((5.0,), 10.0, 3, 1) == "\0\0\5"
    )  # right-aligned: no data left of the first value


@given(
    values=st.lists(st.one_of(st.just(NAN), st.floats(-10, 1e6, allow_nan=False)), max_size=60),
    top=st.one_of(st.just(0.0), st.floats(1e-6, 1e6)),
    width=st.integers(1, 50),
    rows=st.integers(1, 8),
)
def test_each_graph_column_stacks_its_level_bottom_up(values, top, width, rows) -> None:
    """Read back from the blocks, a column holds its value's level: full cells below, the rest on top, blank without
    data."""
    drawn = graph_rows(values, top, width, rows)
    assert len(drawn) == rows and all(len(row) == width for row in drawn)
    shown = values[-width:]
    expected = [-1] * (width - len(shown)) + [level(v, top, rows) for v in shown]
    for column, want in enumerate(expected):
        cells = [row[column] for row in reversed(drawn)]  # bottom row first
        if want < 0:
            assert cells == [" "] * rows
            continue
        assert [BLOCKS.index(c) for c in cells] == [
            min(LEVELS, max(0, want - LEVELS * row)) for row in range(rows)
        ]


def test_graph_rows_right_aligned_top_row_first() -> None:
    assert graph_rows([NAN, 0.0, 5.0, 10.0], 10.0, 6) == ["    ▄█"]
    assert graph_rows([2.5, 5.0, 10.0], 10.0, 3, rows=2) == ["  █", "▄██"]
    assert graph_rows([1.0, 2.0, 10.0, 5.0], 10.0, 2) == ["█▄"]  # the last ``width`` values
    assert (
        graph_rows([1.0], 10.0, 0, rows=2) == ["", ""] and graph_rows([1.0], 10.0, 3, rows=0) == []
    )
    assert graph_rows([], 10.0, 2, rows=1) == ["  "]
    assert graph_rows([5.0, 10.0], 10.0, 1) == ["█"]  # one column wide


def _device(
    gpm: tuple[str, ...], sample: DeviceSample | None, rx: float = 12.0, tx: float = 1.0
) -> DeviceView:
    return DeviceView(True, "", H100, sample, None, {}, gpm, rx, tx)


GPM = ("sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_active_pct")
HOPPER = DeviceSample(
    1.0, sm_active_pct=96.0, sm_occupancy_pct=14.0, dram_bw_pct=24.0, tensor_active_pct=93.0
)


def test_gpm_line_with_tensor_when_it_fits() -> None:
    wide = "SM active 96%  occupancy 14%  DRAM bw 24%  tensor 93%  link RX 12%  TX 1%"
    assert gpm_text(_device(GPM, HOPPER), width=len(wide)).plain == wide
    assert gpm_text(_device(GPM, HOPPER), width=len(wide) - 1).plain == (
        "SM active 96%  occupancy 14%  DRAM bw 24%  link RX 12%  TX 1%"
    )
    assert gpm_text(_device(GPM[:3], HOPPER), width=200).plain == (
        "SM active 96%  occupancy 14%  DRAM bw 24%  link RX 12%  TX 1%"
    )  # GPM without tensor activity
    styles = _styles(gpm_text(_device(GPM, HOPPER), width=200))
    assert styles[:2] == [("SM active ", "dim"), ("96%", "bold")] and styles[-1] == ("1%", "bold")


def test_gpm_line_without_gpm_or_a_sample() -> None:
    assert gpm_text(_device((), HOPPER, rx=NAN), width=200).plain == (
        "SM active · occupancy · DRAM bw n/a (no GPM)  link RX –  TX 1%"
    )
    assert gpm_text(_device(GPM, None), width=200).plain == (
        "SM active –  occupancy –  DRAM bw –  tensor –  link RX 12%  TX 1%"
    )


def test_cores_as_numbers_when_they_fit_else_blocks() -> None:
    assert cores_text((), 80) == "–"
    assert cores_text((12.5, 97.0), 80) == "0: 12%  1: 97%"
    assert cores_text((12.5, 97.0), len("0: 12%  1: 97%")) == "0: 12%  1: 97%"
    assert cores_text((12.5, 97.0), len("0: 12%  1: 97%") - 1) == "▁█"
    assert cores_text((0.0, 0.1, 50.0, 150.0), 3) == " ▁▄█"
    nine = cores_text((100.0,) * 9, 1000)
    assert nine == "█" * 9  # more than eight cores: blocks whatever the width
    assert cores_text((100.0,) * 8, 1000) == "  ".join(f"{i}:100%" for i in range(8))


# -- the widgets themselves, mounted in a real Textual app ---------------------------------------------------------


class _WidgetsApp(App):
    CSS = "GpuLines, ProcessTable { width: 100; }"

    def compose(self) -> ComposeResult:
        yield GpuLines(id="gpus")
        yield ProcessTable()


def _screen(app: App) -> list[str]:
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


@run_async
async def test_the_gpu_lines_widget_shows_every_gpu_and_hides_without_any() -> None:
    app = _WidgetsApp()
    async with app.run_test(size=(110, 20)) as pilot:
        lines = app.query_one("#gpus", GpuLines)  # its keyword arguments reach the widget
        assert (
            lines.display is False and lines.lines == []
        )  # hidden until there is a box of GPUs to show
        lines.show(_gpus(), 1)
        await pilot.pause()
        assert lines.display is True and lines.styles.height.value == 3
        assert lines.lines == render_lines(_gpus(), 1, 98).plain.split(
            "\n"
        )  # its width less its padding
        assert _screen(app)[:3] == [" " + line for line in lines.lines]
        lines.show(_gpus()[:2], None)
        await pilot.pause()
        assert lines.styles.height.value == 2 and lines.lines == render_lines(
            _gpus()[:2], None, 98
        ).plain.split("\n")
        assert _screen(app)[:2] == [" " + line for line in lines.lines]
        lines.show((), None)
        await pilot.pause()
        assert lines.display is False and lines.lines == []


@run_async
async def test_the_gpu_lines_redraw_at_the_new_width() -> None:
    app = _WidgetsApp()
    async with app.run_test(size=(110, 20)) as pilot:
        lines = app.query_one(GpuLines)
        lines.show(_gpus(), 0)
        await pilot.pause()
        assert lines.lines[0].startswith("▸  0 NVIDIA H100 80GB HBM3")
        lines.styles.width = 60
        await pilot.pause()
        await pilot.pause()
        assert lines.lines == render_lines(_gpus(), 0, 58).plain.split("\n")
        assert lines.lines[0].startswith("▸  0 H10…  util 97%")  # the name cut to the room left


@run_async
async def test_the_process_table_widget_shows_at_most_max_rows() -> None:
    app = _WidgetsApp()
    async with app.run_test(size=(110, 20)) as pilot:
        table = app.query_one(ProcessTable)
        table.show(_rows(), max_rows=2)
        await pilot.pause()
        assert table.display is True and table.styles.height.value == 3  # the header and two rows
        screen = _screen(app)
        assert screen[:3] == render_table(_rows()[:2], 100).plain.split("\n")
        table.show(_rows())
        await pilot.pause()
        assert table.styles.height.value == 5 and _screen(app)[4].startswith("B 5")
        table.show(())
        await pilot.pause()
        assert table.display is False


@run_async
async def test_the_probed_line_is_hidden_until_a_probed_process_is_found() -> None:
    scanner = ProbeScanner(RunClock.start())  # not started: it has found nothing

    class _App(App):
        def compose(self) -> ComposeResult:
            yield ProbedLine(scanner, lambda: True)

    app = _App()
    async with app.run_test(size=(80, 5)) as pilot:
        line = app.query_one(ProbedLine)
        assert line.display is False  # from the start, not only after its first refresh
        line.update_line()
        await pilot.pause()
        assert line.display is False


@run_async
async def test_the_process_table_starts_blank_and_redraws_only_what_changed() -> None:
    class _App(App):
        def compose(self) -> ComposeResult:
            yield ProcessTable(id="procs")

    app = _App()
    async with app.run_test(size=(110, 10)) as pilot:
        table = app.query_one("#procs", ProcessTable)  # its keyword arguments reach the widget
        assert _screen(app)[0] == ""  # nothing until the first view
        drawn = []
        draw = table.draw
        table.draw = lambda text: (drawn.append(text), draw(text))[1]
        table.show(_rows())
        # its new height laid out (and redrawn at its width, on the resize that brings): on a busy box the layout can
        # come after one pause, so wait for it, not for a pause
        while table.size.height != table.styles.height.value or not table.size.width:
            await pilot.pause()
        await pilot.pause()
        before = len(drawn)
        assert before >= 1
        table.show(_rows())  # the same rows at the same width: not drawn again
        await pilot.pause()
        assert len(drawn) == before
        table.show(_rows()[:1])
        assert len(drawn) == before + 1


# -- TextLine and MetricRow (gpumon/tui/widgets/lines.py): the cells they draw ----------------------------------------


class _LinesApp(App):
    CSS = "TextLine { width: 20; height: 2; } MetricRow { width: 40; height: 3; }"

    def compose(self) -> ComposeResult:
        yield TextLine("short", id="line")
        yield MetricRow("iterations per s", id="row")


@run_async
async def test_a_text_line_is_one_line_cut_with_an_ellipsis() -> None:
    app = _LinesApp()
    async with app.run_test(size=(50, 8)) as pilot:
        line = app.query_one("#line", TextLine)
        assert _screen(app)[:2] == ["short", ""] and line.plain == "short"
        line.show(Text("abcdefghijklmnopqrstuvwxyz", style="bold"))
        await pilot.pause()
        assert (
            _screen(app)[:2] == ["abcdefghijklmnopqrs…", ""]
            and line.plain == "abcdefghijklmnopqrstuvwxyz"
        )
        strip = line.render_line(0)
        assert strip.cell_length == 20 and all(seg.style.bold for seg in strip if seg.text.strip())
        assert line.render_line(1).text == " " * 20
        line.styles.width = 10
        await pilot.pause()
        assert _screen(app)[0] == "abcdefghi…"  # redrawn at its new width


@run_async
async def test_a_metric_row_draws_label_value_scale_and_graph() -> None:
    app = _LinesApp()
    async with app.run_test(size=(50, 8)) as pilot:
        row = app.query_one("#row", MetricRow)
        history = Series((0.0, 5.0, 10.0, 20.0) * 6, 20.0, "it/s")
        row.show("1234567890123", history)  # a value wider than its column is cut
        await pilot.pause()
        graph = graph_rows(history.values, 20.0, 40 - 10 - 11 - 1, rows=3)
        assert _screen(app)[2:5] == [
            ("iterations per s"[:10] + "12345678901" + " " + graph[0]).rstrip(),
            ("0–20 it/s".rjust(21) + " " + graph[1]).rstrip(),
            ("last 18 s".rjust(21) + " " + graph[2]).rstrip(),  # how long its 18 columns show
        ]
        assert row.value == "1234567890123"
        row.show("7", Series((), 50.0))  # no history yet: the scale without a unit
        await pilot.pause()
        assert (
            _screen(app)[2].rstrip() == "iterations" + " " * 10 + "7"
            and _screen(app)[3].strip() == "0–50"
        )


def test_the_process_table_sorts_by_the_next_column_and_filters_by_text() -> None:
    """Issue 43 (nvitop's habits): ``.`` cycles the sort column, ``/`` keeps the rows containing a text."""
    from gpumon.tui.widgets.processes import SORTS, arrange

    rows = _rows()
    assert arrange(rows) == rows, "as listed: ours first, then the others by GPU memory"
    by = {name: arrange(rows, i) for i, (name, _) in enumerate(SORTS)}
    assert [r.pid for r in by["GPU MEM"]] == [4242, 5, 777, 31337]  # unknown last
    assert [r.pid for r in by["CPU%"]] == [31337, 4242, 5, 777]
    assert [r.pid for r in by["PID"]] == [5, 777, 4242, 31337]
    assert [r.pid for r in arrange(rows, 0, "PYTHON")] == [4242, 31337]
    assert [r.pid for r in arrange(rows, 0, "bob")] == [31337]
    assert arrange(rows, 0, "nothing like it") == ()
    header = render_table(arrange(rows, 3, "python"), 200, 3, "python").plain.split("\n")[0]
    assert header.endswith("COMMAND  by CPU%  /python")


@run_async
async def test_the_monitor_sorts_and_filters_its_process_table_by_key(tmp_path) -> None:
    from gpumon.core.records.model import GpuOthers, OtherGpuProcess, SourceStatus
    from gpumon.tui.screens.filter import FilterScreen
    from tests.tracegen import staggered_pair
    from tests.helpers import wait_until
    from tests.tui.conftest import screen_text
    from tests.tui.test_snapshots import _replay

    app = _replay(staggered_pair(tmp_path / "run"), 20.0)
    model = app.first_screen.feed.model
    model.handle(SourceStatus("nvml", True))
    others = (
        OtherGpuProcess(20.0, 4242, 2048.0, 55.0, "alice", "python train.py", 97.0, 512.0, 60.0),
        OtherGpuProcess(20.0, 31337, 100.0, 9.0, "bob", "python other.py", 150.0, 20480.0, 9.0),
    )
    model.handle(GpuOthers(20.0, others))

    def shown() -> str:
        return "\n".join(screen_text(app))

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "python other.py" in shown(), what="the process table")
        await pilot.press("full_stop")
        await wait_until(pilot, lambda: "by GPU MEM" in shown(), what="sorted")
        await pilot.press("slash")
        await wait_until(pilot, lambda: isinstance(app.screen, FilterScreen), what="the filter")
        await pilot.press(*"bob", "enter")
        await wait_until(pilot, lambda: "/bob" in shown(), what="filtered")
        assert "python other.py" in shown() and "python train.py" not in shown()
