"""The one way outside JSON becomes Python values: bounded in size and depth, numbers finite, or a reason.

Everything gpumon reads that another process or user could have written (run.json, calibration files, probe
messages) goes through ``loads`` or ``read_json`` and then a typed decoder that checks each field (``number``,
``integer``): a bad input is a ``Refused`` with a few words saying why, never a RecursionError, an OverflowError or
a NaN that reaches arithmetic three modules later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpumon.core.records.plainfile import read_plain

MAX_DEPTH = 32  # nesting any gpumon file or message needs is under 8
INT_LIMIT = 2**63  # integers beyond a signed 64-bit value are no count, time or size gpumon records


class Refused(ValueError):
    """Outside data that is not what gpumon reads; ``str()`` is the reason in a few words."""


def _refuse_constant(name: str) -> float:
    raise Refused(f"{name} is not a number gpumon records")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # inf - inf is NaN
        raise Refused(f"number {text[:24]} is out of range")
    return value


# built once: ``json.loads`` with a hook builds a decoder at each call, which cost a tenth of reading a run.json
_STRICT = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_LAX = json.JSONDecoder()


def _text(data: bytes | str) -> str:
    """``data`` as ``json.loads`` decodes it: bytes in the encoding their first bytes say (UTF-8, -16, -32)."""
    if isinstance(data, str):
        if data.startswith("\ufeff"):
            raise Refused("not valid JSON")  # json.loads refuses a byte order mark in text
        return data
    return data.decode(json.detect_encoding(data), "surrogatepass")


def loads(
    data: bytes | str,
    *,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    strict: bool = True,
    walk: bool = True,
) -> Any:
    """``data`` as JSON values; Refused when larger than ``max_bytes``, not JSON, nested deeper than Python's
    parser goes, or (``strict``) holding NaN, an infinity or a float beyond the double range (1e400); ``walk``: also
    when nested deeper than ``max_depth`` or (``strict``) holding an integer beyond 64 bits. A reader whose every
    field is checked by its own decoder (run.json: ``jsonfields``) needs no walk (a third of the cost).

    Not strict (probe messages): such numbers stay (inf, NaN, big ints) for the field checks to refuse one by one,
    so one bad row does not cost the good rows of its batch.
    """
    if len(data) > max_bytes:
        raise Refused(f"larger than {max_bytes} bytes")
    try:
        value = (_STRICT if strict else _LAX).decode(_text(data))
    except RecursionError:
        raise Refused(f"nested deeper than {max_depth} levels") from None
    except Refused:
        raise
    except (ValueError, UnicodeDecodeError):  # json.JSONDecodeError is a ValueError
        raise Refused("not valid JSON") from None
    if walk:
        _walk(value, max_depth, strict)
    return value


def check_depth(value: Any, max_depth: int = MAX_DEPTH) -> None:
    """Refused when ``value`` nests lists and objects deeper than ``max_depth`` (iterative: any depth is safe)."""
    _walk(value, max_depth, numbers=False)


def _walk(value: Any, max_depth: int, numbers: bool) -> None:
    """One pass over ``value`` (iterative): Refused for nesting deeper than ``max_depth`` and, with ``numbers``,
    for a float that is not finite (1e400 reads as inf) or an integer beyond 64 bits."""
    stack: list[tuple[Any, int]] = [([value], 0)]  # the value itself is a child at depth 1
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        if depth > max_depth:
            raise Refused(f"nested deeper than {max_depth} levels")
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif not numbers:
                continue
            elif kind is float and (child - child != 0.0):  # inf - inf and NaN - NaN are NaN
                raise Refused(f"number {child!r} is out of range")
            elif kind is int and not -INT_LIMIT < child < INT_LIMIT:
                raise Refused(f"integer of {len(str(abs(child)))} digits is out of range")


def read_json(
    path: Path | str, *, max_bytes: int, max_depth: int = MAX_DEPTH, walk: bool = True
) -> Any:
    """The JSON file at ``path``, read through no symbolic link and never more than ``max_bytes`` of it.

    OSError as ``open`` raises it (missing, unreadable, a symbolic link: ELOOP, not a plain file: a FIFO, a
    folder); Refused for its content.
    """
    data = read_plain(path, follow=False, max_bytes=max_bytes + 1)
    return loads(data, max_bytes=max_bytes, max_depth=max_depth, walk=walk)


def number(value: object, what: str, low: float, high: float) -> float:
    """``value`` as a float within [``low``, ``high``]; Refused (naming ``what``) for a boolean, a non-number,
    NaN, an infinity or a value out of its physical bounds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(f"{what} is not a number")
    if isinstance(value, int) and not -INT_LIMIT < value < INT_LIMIT:
        raise Refused(f"{what} is out of range")
    as_float = float(value)
    if not low <= as_float <= high:  # NaN fails both
        raise Refused(f"{what} is {_short(value)}, not within [{low:g}, {high:g}]")
    return as_float


def integer(value: object, what: str, low: int, high: int) -> int:
    """``value`` as an int within [``low``, ``high``]; Refused for anything else (booleans and floats included)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{what} is not an integer")
    if not low <= value <= high:
        raise Refused(f"{what} is {_short(value)}, not within [{low}, {high}]")
    return value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."
