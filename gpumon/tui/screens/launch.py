"""The launch dialog: a built-in workload with options, or your own command, for slot A or B."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, OptionList
from textual.widgets.option_list import Option

from gpumon.core.jobs.launcher import LaunchRequest
from gpumon.frontends.plan import builtin_request, check_device
from gpumon.errors import UsageError
from gpumon.workloads.spec import WORKLOADS

COMMAND = "command"


def build_request(
    choice: str, options: str, device: str, command: str, python: str | None = None
) -> LaunchRequest:
    """What the dialog's fields ask for; UsageError with one line when they do not add up."""
    if choice == COMMAND:
        return LaunchRequest.command(command.strip(), python)
    spec = choice + (":" + options.strip() if options.strip() else "")
    return builtin_request(spec, check_device(device.strip() or "auto"), python)


class LaunchScreen(ModalScreen[LaunchRequest | None]):
    """Returns the request to launch, or None when cancelled. Compact (one row per workload and field), so the dialog
    and its buttons fit 80x24; its own footer says its keys (the monitor's do nothing here)."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("tab", "app.focus_next", "Next field"),
        Binding("shift+tab", "app.focus_previous", "Previous", show=False),
    ]

    def __init__(self, slot: str, device: str = "auto", python: str | None = None) -> None:
        super().__init__()
        self.slot = slot
        self.device = device
        self.python = python

    def compose(self) -> ComposeResult:
        with Vertical(id="launch-dialog", classes="dialog"):
            yield Label(f"Launch into slot {self.slot}", classes="dialog-title")
            options = [Option(f"{name:<9} {text}", id=name) for name, text in WORKLOADS.items()]
            options.append(
                Option(
                    f"{COMMAND:<9} your own training command (auto-probe counts optimizer steps)",
                    id=COMMAND,
                )
            )
            yield OptionList(*options, id="launch-workload", compact=True)
            with Horizontal(classes="field"):
                yield Label("Options", classes="field-label")
                yield Input(
                    placeholder="preset=tiny,batch=32,steps=500", id="launch-options", compact=True
                )
            with Horizontal(classes="field"):
                yield Label("Device", classes="field-label")
                yield Input(self.device, id="launch-device", compact=True)
            with Horizontal(classes="field"):
                yield Label("Command", classes="field-label")
                yield Input(
                    placeholder="python train.py --epochs 1", id="launch-command", compact=True
                )
            yield Label(
                "enter: on the list, to its field; in a field, launch", classes="dialog-hint"
            )
            yield Label("", id="launch-error", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Launch", variant="primary", id="launch-ok", compact=True)
                yield Button("Cancel", id="launch-cancel", compact=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        workloads = self.query_one("#launch-workload", OptionList)
        workloads.highlighted = 0
        workloads.focus()

    def _choice(self) -> str:
        workloads = self.query_one("#launch-workload", OptionList)
        index = workloads.highlighted if workloads.highlighted is not None else 0
        return workloads.get_option_at_index(index).id or "fcn"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        target = "#launch-command" if event.option.id == COMMAND else "#launch-options"
        self.query_one(target, Input).focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        is_command = event.option.id == COMMAND
        self.query_one("#launch-options", Input).disabled = is_command
        self.query_one("#launch-device", Input).disabled = is_command
        self.query_one("#launch-command", Input).disabled = not is_command

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "launch-ok":
            self.submit()
        else:
            self.dismiss(None)

    def submit(self) -> None:
        try:
            request = build_request(
                self._choice(),
                self.query_one("#launch-options", Input).value,
                self.query_one("#launch-device", Input).value,
                self.query_one("#launch-command", Input).value,
                self.python,
            )
        except UsageError as exc:
            self.query_one("#launch-error", Label).update(str(exc))
            return
        self.dismiss(request)

    def action_cancel(self) -> None:
        self.dismiss(None)
