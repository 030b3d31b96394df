"""The probed-processes dialog: this user's processes with a probe that gpumon did not start; Enter watches one as B."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from gpumon.core.records.printable import printable
from gpumon.core.capture.probescan import Probed, ProbeScanner
from gpumon.core.records.units import fmt_rate

REFRESH_S = 1.0


def probed_line(p: Probed) -> str:
    """``4242  12.5 it/s  python train.py --epochs 90``."""
    return f"{p.pid:>7}  {fmt_rate(p.iter_per_s):>11}  {p.command}"


class ProbesScreen(ModalScreen[int | None]):
    """Returns the PID to watch as job B, or None when cancelled."""

    BINDINGS = [Binding("escape,q,w", "cancel", "Close")]

    def __init__(self, scanner: ProbeScanner) -> None:
        super().__init__()
        self.scanner = scanner
        self.shown: list[int] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="probes-dialog", classes="dialog"):
            yield Label(
                "Your probed processes (gpumon.probe or gpumon wrap), not started by gpumon",
                classes="dialog-title",
            )
            yield OptionList(id="probes-list")
            yield Label(
                "enter watches the selected one as job B (captured; never signalled)  ·  escape closes",
                classes="dialog-hint",
            )

    def on_mount(self) -> None:
        self.refresh_list()
        self.set_interval(REFRESH_S, self.refresh_list)

    def refresh_list(self) -> None:
        found = self.scanner.processes()
        options = self.query_one("#probes-list", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        if not found:
            options.add_option(
                Option(
                    "none found yet (looked in the rendezvous directory)", id="none", disabled=True
                )
            )
        options.add_options([Option(printable(probed_line(p)), id=str(p.pid)) for p in found])
        self.shown = [p.pid for p in found]
        if found:
            options.highlighted = min(highlighted or 0, len(found) - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id and event.option.id != "none":
            self.dismiss(int(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
