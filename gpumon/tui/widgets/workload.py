"""One workload's panel: state, iteration and sample rates with history, copies, GPU/CPU use, steps."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from gpumon.core.records import units as fmt
from gpumon.core.records.enums import JobState
from gpumon.core.records.model import NO_STEPS
from gpumon.core.records.specwords import shown_spec
from gpumon.core.records.tokens import tokens_per_s, tokens_per_sample
from gpumon.tui.view import WorkloadView
from gpumon.tui.widgets.box import CachedBox
from gpumon.tui.widgets.lines import (
    LABEL_WIDTH,
    VALUE_WIDTH,
    MetricRow,
    TextBlock,
    TextLine,
    set_titles,
)

STATE_CLASSES = ("-empty", "-starting", "-running", "-done", "-failed")


def _state_class(view: WorkloadView) -> str:
    if view.empty:
        return "-empty"
    if view.state in (JobState.STARTING, "warm-up", NO_STEPS):
        return "-starting"
    if view.active:
        return "-running"
    return "-done" if view.healthy else "-failed"


DETAIL_LABEL = 8


def _pair(label: str, first: str, second: str) -> Text:
    text = Text(label.ljust(DETAIL_LABEL), style="dim")
    text.append(first)
    text.append(" · ", style="dim")
    text.append(second)
    return text


class WorkloadPanel(Vertical, CachedBox):
    """Slot A or B; an empty slot says ``empty_hint`` (the live monitor: which key launches into it)."""

    def __init__(self, slot: str, empty_hint: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.slot = slot
        self.empty_hint = empty_hint

    def compose(self) -> ComposeResult:
        yield TextLine(self.empty_hint, classes="hint")
        yield Static("", classes="why", markup=False)  # why a running job shows no rate (NO_STEPS)
        yield MetricRow("iter/s", classes="rate")
        yield MetricRow("samples/s", classes="samples")
        yield TextLine(
            classes="tokens"
        )  # shown when a framework callback said the tokens per sample
        # the copy, GPU, CPU and steps lines in one widget (a frame renders one widget, not one a line: observer_cost),
        # each padded as a TextLine pads
        yield TextBlock(pad_text=True, classes="details")

    def on_mount(self) -> None:
        self.border_title = f"{self.slot} · empty"
        self.border_subtitle = ""
        self.add_class("-empty")
        self._rate = self.query_one(".rate", MetricRow)
        self._samples = self.query_one(".samples", MetricRow)
        self._tokens = self.query_one(".tokens", TextLine)
        self.details = self.query_one(".details", TextBlock)
        self._why = self.query_one(".why", Static)
        self._why_text = ""

    def show(self, view: WorkloadView) -> None:
        state_class = _state_class(view)
        if not self.has_class(state_class):
            self.remove_class(*STATE_CLASSES)
            self.add_class(state_class)
        set_titles(
            self,
            f"{self.slot} · {shown_spec(view.spec) or 'empty'}",
            view.state if not view.empty else "",
        )
        if view.hint != self._why_text:
            self._why_text = view.hint
            self._why.update(view.hint)
            self.set_class(bool(view.hint), "-why")
        if view.empty:
            return
        f = view.figures
        live = f if view.active else None
        self._rate.show(fmt.num(live.iter_per_s if live else None), view.iter_rate)
        self._samples.show(fmt.num(live.samples_per_s if live else None), view.sample_rate)
        self._show_tokens(view.meta, live.samples_per_s if live else math.nan)
        copy = _pair(
            "memcpy" if view.device == "cpu" else "copy",
            fmt.bytes_per_s(f.copy_bandwidth if f else None),
            f"{fmt.bytes_per_s(f.copy_bytes_per_s if f else None)} wall",
        )
        gpu = _pair(
            "GPU mem",
            fmt.used_total(f.gpu_mem_mib if f else None, None),
            f"SM {fmt.pct(f.gpu_sm_util if f else None)}",
        )
        cpu = _pair(
            "CPU",
            fmt.pct(f.cpu_pct if f else None),
            f"RSS {fmt.used_total(f.rss_mib if f else None, None)}",
        )
        steps = Text("steps".ljust(DETAIL_LABEL), style="dim")
        steps.append(f"{f.steps if f else 0:,}")
        if view.meta.get("counts"):  # a callback or the auto-probe said what a step is
            steps.append(f" {str(view.meta['counts']).removesuffix(' steps')}")
            micro = view.meta.get("micro_batches")
            if isinstance(micro, int) and micro > 1:
                steps.append(f" of {micro} batches", style="dim")  # Lightning's bar counts those
        steps.append(" · ", style="dim")
        steps.append(fmt.seconds(view.elapsed_s))
        if view.pid is not None:
            steps.append(f" · pid {view.pid}", style="dim")
        self.details.show_lines([copy, gpu, cpu, steps])

    def _show_tokens(self, meta: dict, samples_per_s: float) -> None:
        """``tokens/s  4.6k · 12.0 a sample`` under samples/s, where the job said its tokens per sample."""
        per_sample = tokens_per_sample(meta)
        self.set_class(per_sample is not None, "-tokens")
        if per_sample is None:
            return
        text = Text("tokens/s".ljust(LABEL_WIDTH), style="dim")
        text.append(fmt.num(tokens_per_s(samples_per_s, meta)).rjust(VALUE_WIDTH), style="bold")
        text.append(f" · {per_sample:g} a sample", style="dim")
        self._tokens.show(text)
