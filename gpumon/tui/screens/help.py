"""The help screen: every key, and what each panel's numbers mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from gpumon.core.records.rates import DEFINITIONS

RATES = {
    term: (term, text + ".") for term, text in DEFINITIONS
}  # core/records/rates.py's words, as they are

MEANINGS: tuple[tuple[str, str], ...] = (
    (
        "Device panel",
        "NVML figures of the selected GPU. Every graph has a fixed scale: percentages 0-100 %, "
        "memory 0-total, PCIe 0-the link's theoretical bandwidth, temperature 0-100 °C; one column per second.",
    ),
    (
        "GPU util",
        "percent of the last sample period in which a kernel ran on the GPU (NVML). It reads 100 % "
        "whenever any kernel runs, even one that keeps a single SM busy, so it cannot tell a full GPU from a "
        "busy one: SM active and occupancy can.",
    ),
    ("Mem util", "percent of the period in which device memory was read or written (NVML)."),
    (
        "PCIe RX / TX",
        "host-to-device (RX) and device-to-host (TX) bytes per second on the PCIe link.",
    ),
    (
        "SM active",
        "percent of the SMs that were busy over the last sample period, averaged (Hopper's GPM "
        "counters). GPU util reads 100 % for a kernel on one SM and for a GEMM alike; SM active tells them apart.",
    ),
    (
        "occupancy",
        "warps resident on the SMs as a percent of the most they can hold (GPM): how full the busy "
        "SMs are. High SM active with low occupancy: every SM works, but with room to spare.",
    ),
    ("DRAM bw", "device-memory bandwidth used, percent of its peak (GPM)."),
    (
        "tensor",
        "tensor-core activity, percent (GPM; read every few seconds, it is costly); shown when it fits.",
    ),
    (
        "link RX / TX",
        "PCIe bytes per second as a percent of the link's capacity (its maximum generation x "
        "width): the link's utilisation.",
    ),
    (
        "n/a (no GPM)",
        "GPM needs a Hopper or newer GPU (not under MIG); runs recorded before it lack these columns.",
    ),
    (
        "No NVML",
        "the panel shows the host's CPU (mean and per core) and memory, and one line saying why "
        "NVML is unavailable.",
    ),
    RATES["iter/s"],
    (
        "rate graphs",
        "fixed scales too: the top is the highest rate seen (or the exclusive rate), rounded up.",
    ),
    ("samples/s", "samples per second over the same window (when the workload reports samples)."),
    (
        "copy",
        "per-copy bandwidth: bytes / time of the copy itself · copy bytes/s: bytes / wall time of the "
        "steps. Per-copy bandwidth includes time-slice waits under sharing (a copy that waited for the other "
        "job's turn looks slow), so it is not the link's speed; link % is the link's utilisation.",
    ),
    (
        "memcpy",
        "a job on the CPU: its 'copies' are RAM-to-RAM memcpy, timed on the host (no PCIe link, no time "
        "slices): bytes / time of each memcpy · bytes / wall time.",
    ),
    (
        "GPU mem · SM",
        "device memory and SM utilisation of the workload's processes (NVML, per process).",
    ),
    ("CPU · RSS", "CPU of the process tree (100 % = one core) and its resident memory."),
    (
        "state",
        "starting (before the first step), no steps (a command of yours that works and takes no step the "
        "probe sees: no optimizer.step() to count; the panel says what to do), warm-up (the first steps, excluded "
        "from rates), running, exited N (N = exit status; negative: killed by signal -N), stopped (by you, or at "
        "the end of --duration).",
    ),
    *(RATES[term] for term in RATES if term != "iter/s"),
    ("● REC", "a capture is being written to the run directory shown; q finishes it."),
    (
        "leave it running",
        "q stops the jobs this monitor started. To leave a run going when you quit or lose the "
        "terminal, start it with gpumon run … --detach: gpumon attach watches it (q there leaves it running), "
        "gpumon stop or x in the viewer ends it.",
    ),
)


# Said only on a box with several GPUs (the overview lines are not there with one).
GPU_MEANINGS: tuple[tuple[str, str], ...] = (
    (
        "GPU lines",
        "one line per GPU of the box: index, name, GPU util, memory used/total, power and how many "
        "processes NVML lists on it; jobs marks the GPU the jobs use (--gpu picks it; the capture records it), ▸ the "
        "one in the device panel (g shows the next). Another GPU's line and panel are read every second with NVML's "
        "cheap calls (util, memory, power, temperature, clock, process lists): no PCIe, GPM or per-process figures, "
        "and the process table lists the jobs' GPU only.",
    ),
)


def keys_table(keys: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, text in keys:
        table.add_row(key, text)
    return table


def meanings_table(extra: tuple[tuple[str, str], ...] = ()) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for name, text in (*extra, *MEANINGS):
        table.add_row(name, text)
    return table


class HelpScreen(ModalScreen[None]):
    """Keys of the screen it was opened from, then the definitions."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(
        self, keys: list[tuple[str, str]], extra: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """``extra``: definitions said before the usual ones (the GPU lines on a box with several GPUs)."""
        super().__init__()
        self.keys = keys
        self.extra = extra

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog", classes="dialog"):
            yield Label("gpumon help (escape closes)", classes="dialog-title")
            with VerticalScroll():
                yield Static(Text("Keys", style="bold underline"))
                yield Static(keys_table(self.keys))
                yield Static(Text("\nWhat the numbers mean", style="bold underline"))
                yield Static(meanings_table(self.extra))

    def action_close(self) -> None:
        self.dismiss(None)
