"""The device panel: NVML figures of the GPU, or the host's CPU (per core) and memory without NVML."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from gpumon.core.records.units import DASH
from gpumon.core.records import units as fmt
from gpumon.tui.view import DeviceView
from gpumon.tui.widgets.box import CachedBox
from gpumon.tui.widgets.graph import BLOCKS, LEVELS
from gpumon.tui.widgets.lines import TextLine, set_titles
from gpumon.tui.widgets.metricgrid import MetricGrid

GPU_ROWS = (
    ("gpu_util", "GPU util"),
    ("mem_util", "Mem util"),
    ("mem_used_mib", "Mem used"),
    ("power_w", "Power"),
    ("pcie_rx_bps", "PCIe RX"),
    ("pcie_tx_bps", "PCIe TX"),
    ("temp_c", "Temp"),
)
HOST_ROWS = (("cpu_pct", "Host CPU"), ("mem_used_mib", "Host mem"))
PERCENT_CORES_MAX = 8
# Hopper's GPM figures on one line under the graphs: (DeviceSample field, label).
GPM_FIGURES = (
    ("sm_active_pct", "SM active"),
    ("sm_occupancy_pct", "occupancy"),
    ("dram_bw_pct", "DRAM bw"),
    ("tensor_active_pct", "tensor"),
)
NO_GPM = "n/a (no GPM)"
TENSOR = "tensor_active_pct"


def _figure(text: Text, label: str, value: str) -> None:
    if text:
        text.append("  ")
    text.append(label + " ", style="dim")
    text.append(value, style="bold")


def gpm_text(view: DeviceView, width: int) -> Text:
    """``SM active 96%  occupancy 14%  DRAM bw 24%  tensor 93%  link RX 12%  TX 1%`` within ``width``.

    Without GPM (older GPUs, older runs) the GPM figures read ``n/a (no GPM)``; tensor activity
    is left out where GPM lacks it or the line would not fit; link % needs the link's capacity.
    """
    link = Text()
    _figure(link, "link RX", fmt.pct(view.link_rx_pct))
    _figure(link, "TX", fmt.pct(view.link_tx_pct))
    text = Text()
    if not view.gpm:
        _figure(text, "SM active · occupancy · DRAM bw", NO_GPM)
    for with_tensor in (True, False) if view.gpm else ():
        text = Text()
        for field, label in GPM_FIGURES:
            if field != TENSOR or (with_tensor and TENSOR in view.gpm):
                _figure(text, label, fmt.pct(getattr(view.sample, field) if view.sample else None))
        if len(text) + 2 + len(link) <= width:
            break
    text.append("  ")
    text.append_text(link)
    return text


def cores_text(per_core: tuple[float, ...], width: int) -> str:
    """Each core's CPU %: numbers when they fit, else one block character per core."""
    if not per_core:
        return DASH
    numbers = "  ".join(f"{i}:{c:3.0f}%" for i, c in enumerate(per_core))
    if len(per_core) <= PERCENT_CORES_MAX and len(numbers) <= width:
        return numbers
    return "".join(
        BLOCKS[max(1 if c > 0 else 0, round(min(c, 100) / 100 * LEVELS))] for c in per_core
    )


class DevicePanel(Vertical, CachedBox):
    """GPU mode (class ``-gpu``) shows seven graphs; host mode shows why NVML is off, CPU and memory."""

    def compose(self) -> ComposeResult:
        yield TextLine(id="nvml-reason")
        yield MetricGrid((*GPU_ROWS, ("sm_clock_mhz", "SM clock")), id="gpu-metrics")
        yield TextLine(id="gpm")
        yield MetricGrid(HOST_ROWS, id="host-metrics")
        yield TextLine(id="host-cores")

    def on_mount(self) -> None:
        self.border_title = "device"
        self.gpu_metrics = self.query_one("#gpu-metrics", MetricGrid)
        self._reason = self.query_one("#nvml-reason", TextLine)
        self._gpm = self.query_one("#gpm", TextLine)
        self._host = self.query_one("#host-metrics", MetricGrid)
        self._cores = self.query_one("#host-cores", TextLine)

    def show(self, view: DeviceView) -> None:
        self.set_class(view.nvml_available, "-gpu")
        self.set_class(not view.nvml_available, "-host")
        if view.nvml_available:
            self._show_gpu(view)
        else:
            self._show_host(view)

    def _show_gpu(self, view: DeviceView) -> None:
        set_titles(self, view.name)
        s = view.sample
        g = view.graphs
        values = {
            "gpu_util": fmt.pct(s.gpu_util if s else None),
            "mem_util": fmt.pct(s.mem_util if s else None),
            "mem_used_mib": fmt.used_total(
                s.mem_used_mib if s else None, s.mem_total_mib if s else None
            ),
            "power_w": fmt.plain(s.power_w if s else None, "W"),
            "pcie_rx_bps": fmt.bytes_per_s(s.pcie_rx_bps if s else None),
            "pcie_tx_bps": fmt.bytes_per_s(s.pcie_tx_bps if s else None),
            "temp_c": fmt.plain(s.temp_c if s else None, "°C"),
        }
        cells = [(key, value, g.get(key)) for key, value in values.items()]
        cells.append(("sm_clock_mhz", fmt.plain(s.sm_clock_mhz if s else None, "MHz"), None))
        self.gpu_metrics.show_all(cells)
        self._gpm.show(
            Text(view.note, style="italic") if view.note else gpm_text(view, self._gpm.size.width)
        )

    def _show_host(self, view: DeviceView) -> None:
        set_titles(self, "host (no GPU figures)")
        host = view.host
        reason = view.reason or "unavailable"
        self._reason.show(Text(f"NVML {reason}", style="italic"))
        self._host.show(
            "cpu_pct", fmt.pct(host.cpu_pct if host else None), view.graphs.get("cpu_pct")
        )
        self._host.show(
            "mem_used_mib",
            fmt.used_total(
                host.mem_used_mib if host else None, host.mem_total_mib if host else None
            ),
            view.graphs.get("mem_used_mib"),
        )
        cores = self._cores
        text = Text("Cores".ljust(10), style="dim")
        text.append(cores_text(host.per_core if host else (), max(0, cores.size.width - 10)))
        cores.show(text)
