"""The interference line under the workload panels, character by character and span by span: what it says before
two jobs run, without exclusive rates, while the window measures, and with a verdict, each job's r and cause.
Every expectation is written out by hand (the rates and r set, their formatting worked out here)."""

from __future__ import annotations

import math

from textual.app import App, ComposeResult

from gpumon.core.interference.attribution import Attribution
from gpumon.core.records.rates import CANNOT_TELL, LOSES, PAYS, Interference
from gpumon.tui.view import DeviceView, Series, View, WorkloadView
from gpumon.tui.widgets.interference import InterferenceLine, interference_text
from tests.tui.conftest import run_async

NAN = math.nan
PREDICTED = "predicted A r 1.40, B r 1.10, STP 1.50: sharing pays"


def _job(slot: str, exclusive: float = NAN, source: str = "") -> WorkloadView:
    return WorkloadView(
        slot,
        "fcn",
        "running",
        True,
        100,
        None,
        12.0,
        Series((), 1.0),
        Series((), 1.0),
        exclusive,
        source,
        11.5,
        (),
    )


def _view(
    result: Interference | None,
    *jobs: WorkloadView,
    causes: dict[str, Attribution] | None = None,
    predicted: str = "",
) -> View:
    device = DeviceView(False, "no NVML", "", None, None, {})
    return View(12.0, device, jobs, result, (), causes=causes or {}, predicted=predicted)


def _cause(slot: str, cause: str, phrase: str) -> Attribution:
    return Attribution(slot, cause, {}, NAN, phrase, "")


def _spans(text) -> list[tuple[str, str]]:
    """The text's styled parts, with the style each was given (the line's own style is ``text.style``)."""
    return [(text.plain[s.start : s.end], str(s.style)) for s in text.spans]


def test_before_two_jobs_run_it_says_so_with_the_exclusive_rates_known() -> None:
    # A's rate 0.5 it/s is known (positive, below 1); B's 0 and C's NaN are not rates. units.num gives three
    # significant digits without trailing zeros (Python's '.3g'): 0.50 below 1, 812, 79.5, 76, 52k
    view = _view(
        None, _job("A", 0.5, "baseline run-a"), _job("B", 0.0, "exclusive phase"), _job("C")
    )
    text = interference_text(view)
    assert text.plain == "sharing needs two running jobs  ·  xA 0.50 it/s (baseline run-a)"
    assert str(text.style) == "dim"
    assert _spans(text) == [
        ("needs two running jobs", "dim"),
        ("  ·  xA 0.50 it/s (baseline run-a)", "dim"),
    ]
    text = interference_text(_view(None, _job("A"), _job("B")))
    assert text.plain == "sharing needs two running jobs" and _spans(text) == [
        ("needs two running jobs", "dim")
    ]


def test_two_known_rates_are_listed_in_the_jobs_order() -> None:
    view = _view(None, _job("A", 812.0, "baseline run-a"), _job("B", 52_000.0, "exclusive phase"))
    text = interference_text(view)
    assert (
        text.plain
        == "sharing needs two running jobs  ·  xA 812 it/s (baseline run-a)  ·  xB 52k it/s (exclusive phase)"
    )
    assert _spans(text)[1:] == [
        ("  ·  xA 812 it/s (baseline run-a)", "dim"),
        ("  ·  xB 52k it/s (exclusive phase)", "dim"),
    ]


def test_without_an_exclusive_rate_of_a_sharing_job_it_says_how_to_get_one() -> None:
    result = Interference(
        {"A": 571.0, "B": 76.0},
        {"A": NAN, "B": NAN},
        NAN,
        "",
        "STP needs the exclusive rate of A and B",
    )
    for view in (
        _view(result, _job("A"), _job("B")),
        _view(result, _job("A"), _job("B"), _job("C", 90.0, "baseline run-c")),
    ):  # C shares nothing here
        text = interference_text(view)
        assert text.plain == "sharing no exclusive rates yet: use --baseline A=RUN or --stagger S"
        assert str(text.style) == "dim"
        assert _spans(text) == [
            ("no exclusive rates yet: use --baseline A=RUN or --stagger S", "dim")
        ]
        text = interference_text(view, "no exclusive rates: this run had no exclusive phase")
        assert text.plain == "sharing no exclusive rates: this run had no exclusive phase"
        assert _spans(text) == [("no exclusive rates: this run had no exclusive phase", "dim")]


def test_while_it_measures_the_rates_known_and_the_prediction_follow_the_time_left() -> None:
    result = Interference(
        {"A": 571.0, "B": 76.0}, {"A": NAN, "B": NAN}, NAN, "", "measuring… (3 s left)", 2.4
    )
    view = _view(result, _job("A", 812.0, "baseline run-a"), _job("B"), predicted=PREDICTED)
    text = interference_text(view)
    assert text.plain == f"measuring… (3 s left)  ·  xA 812 it/s (baseline run-a) │ {PREDICTED}"
    assert str(text.style) == "yellow"
    assert _spans(text) == [
        ("  ·  xA 812 it/s (baseline run-a)", "dim"),
        (f" │ {PREDICTED}", "cyan"),
    ]
    text = interference_text(
        _view(result, _job("A", 812.0, "baseline run-a"), _job("B"))
    )  # no prediction
    assert text.plain == "measuring… (3 s left)  ·  xA 812 it/s (baseline run-a)"


def test_the_verdict_first_then_each_job_its_r_its_rates_and_its_cause() -> None:
    # C has no r (no exclusive rate) and comes first: the jobs after it are still shown. A r 1.42 runs slower
    # (1.42 >= 1.05) and shows its cause; B r 1.04 barely notices (below 1.05): its cause stays unsaid.
    result = Interference(
        {"A": 571.0, "B": 76.0, "C": 12.5},
        {"C": NAN, "A": 1.4221, "B": 1.0437},
        1.55,
        PAYS,
        "sharing pays: STP 1.55",
    )
    causes = {
        "A": _cause("A", "gpu", "mostly waiting for the GPU"),
        "B": _cause("B", "link", "mostly copying"),
        "C": _cause("C", "gpu", "mostly waiting for the GPU"),
    }
    view = _view(
        result,
        _job("A", 812.0, "baseline run-a"),
        _job("B", 79.5, "exclusive phase"),
        _job("C"),
        causes=causes,
        predicted=PREDICTED,
    )
    text = interference_text(view)
    assert text.plain == (
        "sharing pays: STP 1.55 │ C r –  A r 1.42 (812→571 it/s)  "
        f"B r 1.04 (79.5→76 it/s)  A: mostly waiting for the GPU  │ {PREDICTED}"
    )
    assert str(text.style) == "bold green"
    assert _spans(text) == [
        (" │ ", "dim"),
        ("C ", "bold"),
        ("r –  ", "dim"),
        ("A ", "bold"),
        ("r 1.42", "bold"),
        (" (812→571 it/s)  ", "dim"),
        ("B ", "bold"),
        ("r 1.04", "bold"),
        (" (79.5→76 it/s)  ", "dim"),
        ("A: ", "dim"),
        ("mostly waiting for the GPU  ", "yellow"),
        (f"│ {PREDICTED}", "cyan"),
    ]


def test_a_cause_shows_from_r_1_05_on_and_never_when_it_is_none() -> None:
    result = Interference(
        {"A": 100.0, "B": 40.0}, {"A": 1.05, "B": 2.5}, 0.45, LOSES, "sharing loses: STP 0.45"
    )
    causes = {
        "A": _cause("A", "link", "mostly copying"),
        "B": _cause("B", "none", "no cause found"),
    }
    view = _view(
        result,
        _job("A", 105.0, "baseline run-a"),
        _job("B", 100.0, "baseline run-b"),
        causes=causes,
    )
    text = interference_text(view)
    assert text.plain == (
        "sharing loses: STP 0.45 │ A r 1.05 (105→100 it/s)  "
        "B r 2.50 (100→40 it/s)  A: mostly copying  "
    )
    assert str(text.style) == "bold red"
    assert ("mostly copying  ", "yellow") in _spans(text)


def test_each_verdict_has_its_colour_and_a_line_without_one_is_dim() -> None:
    for verdict, words, style in (
        (PAYS, "sharing pays: STP 1.20", "bold green"),
        (LOSES, "sharing loses: STP 0.80", "bold red"),
        (CANNOT_TELL, "cannot tell: STP 1.00", "bold yellow"),
        ("", "STP needs the exclusive rate of B", "dim"),
    ):
        result = Interference({"A": 50.0, "B": 20.0}, {}, NAN, verdict, words)
        text = interference_text(_view(result, _job("A", 60.0, "baseline run-a"), _job("B")))
        assert text.plain == words + " │ " and str(text.style) == style, verdict
        assert _spans(text) == [(" │ ", "dim")]


def test_without_words_the_line_starts_with_sharing() -> None:
    result = Interference({"A": 50.0, "B": 20.0}, {"A": 1.2}, NAN, "", "")
    text = interference_text(_view(result, _job("A", 60.0, "baseline run-a"), _job("B")))
    assert text.plain == "sharing A r 1.20 (60→50 it/s)  " and str(text.style) == "dim"


class _LineApp(App):
    CSS = "InterferenceLine { width: 100; }"

    def compose(self) -> ComposeResult:
        yield InterferenceLine()


@run_async
async def test_the_widget_shows_the_line_with_the_screens_hint() -> None:
    app = _LineApp()
    async with app.run_test(size=(110, 4)) as pilot:
        line = app.query_one(InterferenceLine)
        result = Interference({"A": 571.0, "B": 76.0}, {"A": NAN, "B": NAN}, NAN, "", "")
        line.show_view(
            _view(result, _job("A"), _job("B")), "no exclusive rates: replay a run with one"
        )
        await pilot.pause()
        assert line.plain == "sharing no exclusive rates: replay a run with one"
        line.show_view(_view(None, _job("A", 812.0, "baseline run-a")))
        await pilot.pause()
        assert line.plain == "sharing needs two running jobs  ·  xA 812 it/s (baseline run-a)"
        line.show_view(_view(result, _job("A"), _job("B")))
        assert line.plain == "sharing no exclusive rates yet: use --baseline A=RUN or --stagger S"
