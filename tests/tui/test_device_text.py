"""The device panel on screen, line by line: a GPU's seven graphs, SM clock and GPM line (or the note of a GPU that is
not the jobs'), and without NVML the reason, the host's CPU and memory and each core. The panel is laid out with
gpumon's own stylesheet, 100 columns wide: two columns of rows 47 cells wide (label 10, value 11, a space, a graph of
25 columns on one row). Every expectation is written out by hand."""

from __future__ import annotations

import math
from pathlib import Path

from textual.app import App, ComposeResult

import gpumon.tui
from gpumon.core.records.model import DeviceSample, HostSample
from gpumon.tui.view import DeviceView, Series
from gpumon.tui.widgets.device import DevicePanel, cores_text
from gpumon.tui.widgets.lines import TextLine
from tests.tui.conftest import run_async

NAN = math.nan
H100 = "NVIDIA H100 80GB HBM3"
SAMPLE = DeviceSample(
    1.0,
    gpu_util=97.0,
    mem_util=41.0,
    mem_used_mib=41984.0,
    mem_total_mib=81920.0,
    pcie_rx_bps=12.34e9,
    pcie_tx_bps=1.5e6,
    power_w=512.4,
    temp_c=63.0,
    sm_clock_mhz=1980.0,
)
HOST = HostSample(
    1.0, cpu_pct=37.0, mem_used_mib=6144.0, mem_total_mib=16384.0, per_core=(12.5, 97.0)
)


class _PanelApp(App):
    CSS_PATH = str(Path(gpumon.tui.__file__).parent / "gpumon.tcss")

    def compose(self) -> ComposeResult:
        yield DevicePanel(id="device")


def _screen(app: App) -> list[str]:
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def _row(label: str, value: str, graph: str = "") -> str:
    """One row of the metric grid: the label left in 10 cells, the value right in 11, a space, the graph's 25."""
    return label.ljust(10) + value.rjust(11) + " " + graph.rjust(25)


def _panel(title: str, *lines: str) -> list[str]:
    top = "╭─ " + title + " " + "─" * (100 - 5 - len(title)) + "╮"
    return [top, *("│ " + line.ljust(96) + " │" for line in lines), "╰" + "─" * 98 + "╯"]


@run_async
async def test_a_gpu_shows_each_figure_beside_its_graph():
    app = _PanelApp()
    async with app.run_test(size=(100, 12)) as pilot:
        panel = app.query_one(DevicePanel)
        assert panel.border_title == "device"  # until the first view names the GPU
        graphs = {
            "gpu_util": Series((50.0, 100.0), 100.0, "%"),
            "mem_util": Series((100.0,), 100.0, "%"),
            "mem_used_mib": Series((20480.0,), 81920.0, "MiB"),
            "power_w": Series((700.0,), 700.0, "W"),
            "pcie_rx_bps": Series((63e9,), 63e9, "B/s"),
            "pcie_tx_bps": Series((31.5e9,), 63e9, "B/s"),
            "temp_c": Series((45.0,), 90.0, "°C"),
        }
        panel.show(DeviceView(True, "", H100, SAMPLE, None, graphs, (), 12.0, 1.0))
        await pilot.pause()
        assert (
            panel.has_class("-gpu") and not panel.has_class("-host") and panel.border_title == H100
        )
        # 41984 MiB of 81920 is 41.0 of 80 GiB; 12.34e9 B/s is 12.3 GB/s, 1.5e6 is 1.5 MB/s; 512.4 W shows 512 W.
        # One row of eighths: 50 of 100 is 4 eighths (▄), 20480 of 81920 is 2 (▂), 31.5 of 63 is 4, 45 of 90 is 4.
        assert _screen(app)[:7] == _panel(
            H100,
            _row("GPU util", "97%", "▄█") + "  " + _row("Mem util", "41%", "█").rstrip(),
            _row("Mem used", "41.0/80 GiB", "▂") + "  " + _row("Power", "512 W", "█").rstrip(),
            _row("PCIe RX", "12.3 GB/s", "█") + "  " + _row("PCIe TX", "1.5 MB/s", "▄").rstrip(),
            _row("Temp", "63 °C", "▄") + "  " + _row("SM clock", "1980 MHz").rstrip(),
            "SM active · occupancy · DRAM bw n/a (no GPM)  link RX 12%  TX 1%",
        )


@run_async
async def test_a_gpu_without_a_sample_shows_dashes_and_gpm_fits_the_panel():
    app = _PanelApp()
    async with app.run_test(size=(100, 12)) as pilot:
        panel = app.query_one(DevicePanel)
        gpm = ("sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_active_pct")
        panel.show(DeviceView(True, "", "GPU 1", None, None, {}, gpm, NAN, NAN))
        await pilot.pause()
        dash = "–"
        assert _screen(app)[:7] == _panel(
            "GPU 1",
            _row("GPU util", dash) + "  " + _row("Mem util", dash).rstrip(),
            _row("Mem used", dash) + "  " + _row("Power", dash).rstrip(),
            _row("PCIe RX", dash) + "  " + _row("PCIe TX", dash).rstrip(),
            _row("Temp", dash) + "  " + _row("SM clock", dash).rstrip(),
            "SM active –  occupancy –  DRAM bw –  tensor –  link RX –  TX –",
        )
        sample = DeviceSample(
            2.0,
            mem_used_mib=512.0,
            sm_active_pct=95.7,
            sm_occupancy_pct=14.1,
            dram_bw_pct=23.9,
            tensor_active_pct=92.9,
        )  # 512 MiB used of a total NVML did not give
        panel.show(DeviceView(True, "", "GPU 1", sample, None, {}, gpm, 50.0, 0.4))
        await pilot.pause()
        assert _screen(app)[2].startswith("│ " + _row("Mem used", "512 MiB"))
        assert (
            _screen(app)[5]
            == "│ "
            + "SM active 96%  occupancy 14%  DRAM bw 24%  tensor 93%  link RX 50%  TX 0%".ljust(96)
            + " │"
        )
        gpm_line = app.query_one("#gpm", TextLine)
        panel.show(
            DeviceView(
                True,
                "",
                "GPU 1",
                sample,
                None,
                {},
                gpm,
                50.0,
                0.4,
                note="not the jobs' GPU: no GPM read",
            )
        )
        await pilot.pause()
        assert (
            gpm_line.plain == "not the jobs' GPU: no GPM read" and gpm_line._text.style == "italic"
        )


@run_async
async def test_without_nvml_the_host_shows_why_its_cpu_memory_and_cores():
    app = _PanelApp()
    async with app.run_test(size=(100, 12)) as pilot:
        panel = app.query_one(DevicePanel)
        graphs = {
            "cpu_pct": Series((37.0,), 100.0, "%"),
            "mem_used_mib": Series((8192.0,), 16384.0, "MiB"),
        }
        panel.show(DeviceView(False, "not found", "", None, HOST, graphs))
        await pilot.pause()
        assert panel.has_class("-host") and not panel.has_class("-gpu")
        assert panel.border_title == "host (no GPU figures)"
        # 37 % is 2.96 eighths of a row: 3 (▃); 8 of 16 GiB 4 (▄). 12.5 % shows 12 (rounded half to even)
        assert _screen(app)[:5] == _panel(
            "host (no GPU figures)",
            "NVML not found",
            _row("Host CPU", "37%", "▃") + "  " + _row("Host mem", "6.0/16 GiB", "▄").rstrip(),
            "Cores     0: 12%  1: 97%",
        )
        reason, cores = (
            app.query_one("#nvml-reason", TextLine),
            app.query_one("#host-cores", TextLine),
        )
        assert (
            reason._text.style == "italic" and cores._text.style == "dim"
        )  # "Cores" and its padding
        assert cores.plain[:10] == "Cores     "


@run_async
async def test_without_nvml_or_a_host_sample_it_says_what_it_lacks():
    app = _PanelApp()
    async with app.run_test(size=(100, 12)) as pilot:
        panel = app.query_one(DevicePanel)
        panel.show(DeviceView(False, "", "", None, None, {}))
        await pilot.pause()
        assert _screen(app)[:5] == _panel(
            "host (no GPU figures)",
            "NVML unavailable",
            _row("Host CPU", "–") + "  " + _row("Host mem", "–").rstrip(),
            "Cores     –",
        )


@run_async
async def test_the_cores_turn_to_blocks_when_their_numbers_do_not_fit():
    app = _PanelApp()
    async with app.run_test(
        size=(28, 12)
    ) as pilot:  # 24 cells inside the panel: 14 for the cores after "Cores"
        panel = app.query_one(DevicePanel)
        view = DeviceView(
            False, "not found", "", None, HostSample(1.0, 50.0, 1024.0, 2048.0, (12.5, 97.0)), {}
        )
        panel.show(view)
        await pilot.pause()
        cores = app.query_one("#host-cores", TextLine)
        assert cores.plain == "Cores     0: 12%  1: 97%"  # 14 cells: the numbers just fit
        await pilot.resize_terminal(27, 12)
        await pilot.pause()
        panel.show(view)  # 13 cells: one block per core, 12.5 % one eighth (▁), 97 % eight (█)
        assert cores.plain == "Cores     ▁█"
        panel.show(
            DeviceView(
                False,
                "not found",
                "",
                None,
                HostSample(1.0, 50.0, 1024.0, 2048.0, (12.5, 97.0, 0.0)),
                {},
            )
        )
        assert cores.plain == "Cores     ▁█ "  # an idle core: a blank


def test_a_cores_block_is_its_percent_in_eighths_rounded() -> None:
    # Ten cores (more than eight): one block each. 18.8 % of 8 eighths is 1.504: two (▂); 6.2 % is 0.496, rounded
    # to 0, but a busy core shows at least one (▁); 100 % and more fill the cell (█); 0 % is blank.
    assert cores_text((18.8, 6.2, 100.0, 250.0, 0.0) * 2, 80) == "▂▁██ ▂▁██ "
