"""A dataclass's JSON form from its fields: each field says once its key, how it is checked when read and whether a
null is written, and ``encode`` / ``decode`` do the rest (run.json's records, ``GpuInfo``, ``HostInfo``).

``decode`` reads only the keys the fields name (an unknown key is ignored, never kept) and raises ``Refused`` naming
the key and why when a value is not what its field takes: the one reading of outside JSON into a record.

A check that returns some values unchanged (text, a flag, a number within its bounds, null where optional) or looks
them up (an enum's words) says which (``Plain``), and ``decode`` takes such a value without calling it, through one
function per class written once from its fields (``_decoder``, as ``dataclasses`` writes ``__init__``): most of a
run.json's fields are plain, and the calls and the loop over the fields were most of the cost of reading one
(``gpumon runs`` reads thousands). Anything else still goes to the check, which gives the same value or refuses
with its reason (tests/core/test_jsonfields_plain.py checks that both ways agree on any JSON value).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, TypeVar

from gpumon.core.records.decode import INT_LIMIT, Refused, check_depth, integer, number
from gpumon.core.records.enums import TextEnum

Check = Callable[
    [Any, str], Any
]  # (a JSON value, where it was) -> the field's value; Refused otherwise
R = TypeVar("R")


@dataclass(frozen=True)
class Plain:
    """The values a check returns unchanged: of one of ``types`` exactly (within [``low``, ``high``] where given), or
    None where ``none``; and the text it looks up in ``words`` (an enum's members by their word)."""

    types: tuple[type, ...] = ()
    low: float | None = None
    high: float | None = None
    none: bool = False
    words: dict[str, Any] | None = None


_PLAINS: dict[Check, Plain] = {}  # the checks that return some values unchanged, and which


def _plain(check: Check, plain: Plain) -> Check:
    _PLAINS[check] = plain
    return check


def slot(
    check: Check,
    *,
    key: str | None = None,
    default: Any = None,
    factory: Callable[[], Any] | None = None,
    null: bool = False,
    out: Callable[[Any], Any] | None = None,
    omit_empty: bool = False,
    omit: Callable[[Any], bool] | None = None,
) -> Any:
    """A field read by ``check`` from ``key`` (the field's name by default); ``null``: written even when None;
    ``out``: how its value is written (default ``to_json``); ``omit_empty``: not written when empty; ``omit``: not
    written when it says so of the value."""
    metadata = {
        "check": check,
        "key": key,
        "null": null,
        "out": out,
        "omit_empty": omit_empty,
        "omit": omit,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def same(cls: type, name: str) -> Any:
    """``cls``'s field ``name`` again (its key, check and default) for a record that reads part of what ``cls``
    reads: both decode that key through the one check (``runmeta.RunHead``: the fields a row of ``gpumon runs``
    shows)."""
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if f.default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=f.default_factory, metadata=f.metadata)
    return dataclasses.field(default=f.default, metadata=f.metadata)


def key_of(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or f.name


def encode(record: Any) -> dict[str, Any]:
    """The record's JSON object: every field with its key, None left out unless its field writes null."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if value is None and not f.metadata.get("null", False):
            continue
        if f.metadata.get("omit_empty") and not value:
            continue
        omit = f.metadata.get("omit")
        if omit is not None and omit(value):
            continue
        write = f.metadata.get("out") or to_json
        out[key_of(f)] = None if value is None else write(value)
    return out


def to_json(value: Any) -> Any:
    """A field's value as JSON values (records by their ``to_json``, enums by their text, tuples as lists)."""
    if isinstance(value, Enum):
        return value.value
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def decode(cls: type[R], entry: object, where: str = "") -> R:
    """``cls`` from a JSON object: each field's key checked by its field (absent: its default); Refused naming
    ``where`` + the key otherwise."""
    if not isinstance(entry, dict):
        raise Refused(f"{where.rstrip('.') or 'the file'} is not an object")
    return _decoder(cls)(entry, where)  # type: ignore[arg-type]


def decode_known(cls: type[R], entry: dict[str, Any]) -> R:
    """``cls`` from what a source of ours reported (NVML's device info): each key its field takes, a value its
    check refuses left at the field's default instead of refusing the whole (a driver's odd answer)."""
    values = {}
    for name, key, check in _readers(cls):  # type: ignore[arg-type]
        if key in entry:
            try:
                values[name] = check(entry[key], key)
            except Refused:
                continue
    return cls(**values)


@functools.cache
def _readers(cls: type) -> tuple[tuple[str, str, Check], ...]:
    """Each field of ``cls``: its name, its key and its check (looked up once per class)."""
    return tuple((f.name, key_of(f), f.metadata["check"]) for f in dataclasses.fields(cls))


@functools.cache
def _decoder(cls: type) -> Callable[[dict[str, Any], str], Any]:
    """``decode``'s work for ``cls``, written once as one function: each field's key looked up, a plain value
    (``Plain``) taken as it is, anything else given to the field's check."""
    scope: dict[str, Any] = {"cls": cls}
    lines = ["def decode_fields(entry, where):", "    values = {}"]
    for i, (name, key, check) in enumerate(_readers(cls)):
        plain = _PLAINS.get(check, Plain())
        scope[f"check{i}"], scope[f"types{i}"], scope[f"words{i}"] = check, plain.types, plain.words
        scope[f"low{i}"], scope[f"high{i}"] = plain.low, plain.high
        lines += [f"    if {key!r} in entry:", f"        value = entry[{key!r}]"]
        taken = "if"
        if plain.types:
            bounds = f" and low{i} <= value <= high{i}" if plain.low is not None else ""
            lines += [
                f"        if type(value) in types{i}{bounds}:",
                f"            values[{name!r}] = value",
            ]
            taken = "elif"
        if plain.none:
            lines += [f"        {taken} value is None:", f"            values[{name!r}] = None"]
            taken = "elif"
        if plain.words is not None:
            lines += [
                f"        {taken} type(value) is str and value in words{i}:",
                f"            values[{name!r}] = words{i}[value]",
            ]
            taken = "elif"
        call = f"values[{name!r}] = check{i}(value, where + {key!r})"
        lines += [f"        {call}"] if taken == "if" else ["        else:", f"            {call}"]
    lines.append("    return cls(**values)")
    exec("\n".join(lines), scope)  # the keys and names are the fields' own, never read from a file
    return scope["decode_fields"]


# -- checks: (value, where) -> the field's value, or Refused -------------------------------------------------


def optional(check: Check) -> Check:
    """``check``, with null read as None."""
    plain = _PLAINS.get(check, Plain())
    return _plain(
        lambda value, where: None if value is None else check(value, where),
        dataclasses.replace(plain, none=True),
    )


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise Refused(f"{where} is not text")
    return value


def flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise Refused(f"{where} is not true or false")
    return value


_plain(text, Plain((str,)))
_plain(flag, Plain((bool,)))


def numbers(low: float, high: float) -> Check:
    """A number within its physical bounds (finite)."""
    return _plain(lambda value, where: number(value, where, low, high), Plain((float,), low, high))


def integers(low: int, high: int) -> Check:
    return _plain(lambda value, where: integer(value, where, low, high), Plain((int,), low, high))


def member(kind: type[TextEnum]) -> Check:
    """One of ``kind``'s words."""

    def check(value: Any, where: str) -> TextEnum:
        try:
            return kind(value)
        except ValueError:
            words = ", ".join(m.value for m in kind)
            raise Refused(f"{where} is {str(value)[:24]!r}, not one of {words}") from None

    return _plain(check, Plain(words={m.value: m for m in kind}))


def texts(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Refused(f"{where} is not a list of text")
    return tuple(value)


def ints(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise Refused(f"{where} is not a list of integers")
    return tuple(integer(v, where, -INT_LIMIT + 1, INT_LIMIT - 1) for v in value)


def free(value: Any, where: str) -> dict[str, Any]:
    """A free-form object (what a job said of itself, versions): an object, nested at most 8 deep."""
    if not isinstance(value, dict):
        raise Refused(f"{where} is not an object")
    if not any(type(v) is dict or type(v) is list for v in value.values()):
        return value  # one level deep: nothing to walk (most jobs' meta, versions)
    try:
        check_depth(value, 8)
    except Refused as exc:
        raise Refused(f"{where}: {exc}") from None
    return value


def record(cls: type[R]) -> Check:
    """A nested record, decoded by its fields."""
    return lambda value, where: decode(cls, value, where + ".")


def records(cls: type[R], limit: int) -> Check:
    """A list of at most ``limit`` nested records."""

    def check(value: Any, where: str) -> list[R]:
        if not isinstance(value, list):
            raise Refused(f"{where} is not a list")
        if len(value) > limit:
            raise Refused(f"{where} holds more than {limit} entries")
        return [decode(cls, v, f"{where}[{i}].") for i, v in enumerate(value)]

    return check
