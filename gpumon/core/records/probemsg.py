"""The probe protocol's messages as the monitor reads them: one line of JSON in, checked values out.

``decode`` is the one place a probe line (from a child's pipe or another process's rendezvous socket) becomes
data: a ``Steps`` batch of checked rows (a row that is not seven in-range values is dropped and counted, the rest
of its batch kept), a ``Meta`` description (finite, bounded, JSON-encodable), another known message, or a
``Refused`` with the reason. Protocol: docs/probe.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpumon.core.records.decode import Refused, check_depth, loads
from gpumon.core.records.protocol import PROTOCOL_VERSION

MAX_LINE = 1 << 20  # bytes of one message; a longer one is refused whole
MAX_META_DEPTH = 8
MAX_META_KEYS = 256
_INT64 = 2**63 - 1
_MAX_ITER_NS = 10**15  # 11.6 days for one step: beyond it a row is no step's measurement
_MAX_SAMPLES = 1e15
_MAX_COPY_BYTES = 2**50  # a petabyte copied in one step
_NUMBERS = (int, float)


@dataclass(slots=True)
class StepRow:
    """One checked step row: the probe's clock in ns, NaN where the probe had no value.

    Read-only by convention, not frozen: one is built per step (0.23 against 0.98 µs frozen, 2-core VM)."""

    step: int
    t_ns: int
    iter_ns: int
    samples: float
    warmup: bool
    copy_bytes: int
    copy_ns: float


@dataclass(frozen=True, slots=True)
class Steps:
    pid: int
    rows: list[StepRow]
    bad_rows: int  # rows of the batch that were refused (their reason: ``reason``)
    reason: str
    dropped: int  # steps the probe itself dropped (the monitor read too slowly)


@dataclass(frozen=True, slots=True)
class Meta:
    pid: int
    info: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Other:
    """A known message the monitor takes no data but a count from (hello; bye: ``refused``, the values the probe
    dropped because it could not send them, NaN or not JSON)."""

    pid: int
    kind: str
    refused: int = 0


Message = Steps | Meta | Other
KINDS = ("hello", "bye", "steps", "meta")


def decode(line: bytes) -> Message:
    """One probe line; Refused with the reason for anything but a well-formed message of this protocol."""
    # no walk: every field read is checked by type and range below (a meta message's info by ``_info``, depth
    # included), and a nesting too deep for the decoder itself is refused by ``loads``
    message = loads(line, max_bytes=MAX_LINE, strict=False, walk=False)
    if not isinstance(message, dict):
        raise Refused("not a JSON object")
    version = message.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise Refused(f"probe protocol v{_short(version)} is not v{PROTOCOL_VERSION}")
    pid = message.get("pid", 0)
    if type(pid) is not int or not 0 <= pid <= _INT64:
        raise Refused(f"pid {_short(pid)} is not a process id")
    kind = message.get("type")
    if kind == "steps":
        return _steps(pid, message)
    if kind == "meta":
        return Meta(pid, _info(message.get("info")))
    if kind in KINDS:
        refused = message.get("refused", 0)
        return Other(pid, str(kind), refused if _int_in(refused, 0, _INT64) else 0)
    raise Refused(f"unknown message type {_short(kind)}")


def _steps(pid: int, message: dict[str, Any]) -> Steps:
    rows = message.get("rows")
    if not isinstance(rows, list):
        raise Refused("a steps message without a list of rows")
    dropped = message.get("dropped", 0)
    if type(dropped) is not int or not 0 <= dropped <= _INT64:
        dropped = 0
    good: list[StepRow] = []
    reason = ""
    for row in rows:
        try:
            good.append(_row(row))
        except Refused as exc:
            reason = reason or str(exc)
    return Steps(pid, good, len(rows) - len(good), reason, dropped)


def within(message: Steps, low_ns: int, high_ns: int) -> Steps:
    """``message`` with only the rows that end within [``low_ns``, ``high_ns``] (a launched child's steps end after
    its launch and before they are read: the others are refused rows, with the reason)."""
    kept = [row for row in message.rows if low_ns <= row.t_ns <= high_ns]
    if len(kept) == len(message.rows):
        return message
    reason = message.reason or "a step row ends before its job started or after it was read"
    bad = message.bad_rows + len(message.rows) - len(kept)
    return Steps(message.pid, kept, bad, reason, message.dropped)


def _row(row: object) -> StepRow:
    if type(row) is not list or len(row) != 7:
        raise Refused("a step row is not a list of 7 values")
    step, t_ns, iter_ns, samples, warmup, copy_bytes, copy_ns = row
    # the range checks written out, not ``_int_in`` calls: this runs for every step (hundreds a second)
    if not (
        type(step) is int
        and 0 <= step <= _INT64
        and type(t_ns) is int
        and -_INT64 <= t_ns <= _INT64
        and type(iter_ns) is int
        and 0 <= iter_ns <= _MAX_ITER_NS
        and (samples is None or (type(samples) in _NUMBERS and 0.0 <= samples <= _MAX_SAMPLES))
        and (warmup in (0, 1))
        and type(copy_bytes) is int
        and 0 <= copy_bytes <= _MAX_COPY_BYTES
        and (copy_ns is None or (type(copy_ns) is int and 0 <= copy_ns <= _MAX_ITER_NS))
    ):
        raise Refused("a step row holds a value out of range or of the wrong type")
    return StepRow(
        step,
        t_ns,
        iter_ns,
        math.nan if samples is None else float(samples),
        bool(warmup),
        copy_bytes,
        math.nan if copy_ns is None else float(copy_ns),
    )


def _int_in(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _info(info: object) -> dict[str, Any]:
    """A meta message's ``info``: an object of at most MAX_META_KEYS keys, MAX_META_DEPTH deep, numbers finite."""
    if not isinstance(info, dict):
        raise Refused("a meta message without an info object")
    if len(info) > MAX_META_KEYS:
        raise Refused(f"a meta message of more than {MAX_META_KEYS} keys")
    check_depth(info, MAX_META_DEPTH)
    stack: list[Any] = [info]
    while stack:
        item = stack.pop()
        values = item.values() if isinstance(item, dict) else item
        for value in values:
            if isinstance(value, (dict, list)):
                stack.append(value)
            elif isinstance(value, float) and not math.isfinite(value):
                raise Refused("a meta message holds a number that is not finite")
            elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT64:
                raise Refused("a meta message holds an integer out of range")
    return info


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."
