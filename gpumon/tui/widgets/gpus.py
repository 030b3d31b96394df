"""The overview lines: one per GPU of a box with several (index, name, util, memory, power, processes)."""

from __future__ import annotations

from rich.text import Text

from gpumon.core.records import units as fmt
from gpumon.core.records.model import GpuSummary
from gpumon.tui.widgets.lines import TextBlock

SHOWN = "▸"  # the GPU the device panel shows (g moves it)
VENDOR = "NVIDIA "  # dropped from the names when they do not fit


def _processes(count: int | None) -> str:
    if count is None:
        return "? procs"
    return f"{count} proc" + ("s" if count != 1 else "")


LABELS = ("util ", "mem ", "", "")


def _figures(gpu: GpuSummary) -> list[str]:
    """util %, memory used/total, power and processes, unpadded (dashes for a lost GPU)."""
    s = gpu.sample
    if s is None:
        return [fmt.DASH, fmt.DASH, fmt.DASH, _processes(gpu.processes)]
    return [
        fmt.pct(s.gpu_util),
        fmt.used_total(s.mem_used_mib, s.mem_total_mib),
        fmt.plain(s.power_w, "W"),
        _processes(gpu.processes),
    ]


def render_lines(gpus: tuple[GpuSummary, ...], shown: int | None, width: int) -> Text:
    """One line per GPU: ``▸ 0 H100 80GB HBM3  util  97%  mem 41.0/80 GiB  512 W  3 procs  jobs``.

    Columns are as wide as their widest value; the name takes the rest (without "NVIDIA " when short of room).
    """
    digits = max(len(str(g.index)) for g in gpus)
    rows = [_figures(g) for g in gpus]
    widths = [max(len(row[i]) for row in rows) for i in range(len(LABELS))]
    fixed = (
        2 + digits + 1 + sum(2 + len(label) + w for label, w in zip(LABELS, widths)) + len("  jobs")
    )
    names = [g.name or "GPU" for g in gpus]
    room = max(4, width - fixed)
    if max(len(n) for n in names) > room:
        names = [n[len(VENDOR) :] if n.startswith(VENDOR) else n for n in names]
    name_width = min(room, max(len(n) for n in names))
    text = Text()
    for i, (gpu, values, name) in enumerate(zip(gpus, rows, names)):
        if i:
            text.append("\n")
        name = name if len(name) <= name_width else name[: name_width - 1] + "…"
        cells = "  ".join(label + value.rjust(w) for label, value, w in zip(LABELS, values, widths))
        mark = SHOWN if gpu.index == shown else " "
        text.append(
            f"{mark} {gpu.index:>{digits}} {name:<{name_width}}  {cells}",
            style="bold" if gpu.index == shown else ("dim" if gpu.sample is None else ""),
        )
        if gpu.jobs:
            text.append("  jobs", style="bold cyan")
        elif gpu.sample is None:
            text.append("  lost", style="bold")
    return text


class GpuLines(TextBlock):
    """The overview of a box with several GPUs, above the device panel (hidden with one GPU)."""

    DEFAULT_CSS = """
    GpuLines { height: 1; padding: 0 1; }  /* set to its lines by show() */
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: tuple[tuple[GpuSummary, ...], int | None, int] | None = None
        self.display = False

    def show(self, gpus: tuple[GpuSummary, ...], shown: int | None) -> None:
        """Draw one line per GPU of ``gpus``, ``shown`` marked; nothing (hidden) when there are none."""
        self.display = bool(gpus)
        width = self.content_size.width or 78
        if self._shown == (gpus, shown, width):
            return
        self._shown = (gpus, shown, width)
        if gpus and (self.styles.height is None or self.styles.height.value != len(gpus)):
            self.styles.height = len(gpus)
        self.draw(render_lines(gpus, shown, width) if gpus else "")

    @property
    def lines(self) -> list[str]:
        """The lines as drawn (plain text), for tests."""
        gpus, shown, width = self._shown or ((), None, 0)
        return render_lines(gpus, shown, width).plain.split("\n") if gpus else []

    def on_resize(self) -> None:
        super().on_resize()
        if self._shown is not None:
            gpus, shown, _ = self._shown
            self._shown = None
            self.show(gpus, shown)
