"""CSV lines of records, made by one f-string per table (the recorder's rows, hundreds of steps a second).

``row_text(cls, columns)`` compiles, once per table, a function from a record to its line, choosing
each column's rendering by the field's declared type, as ``dataclasses`` compiles ``__init__``:
what ``csv.writer`` wrote from the recorder's cells, byte for byte (tests/core/test_rowtext.py), at
about half its CPU (0.9 against 1.6 µs a step row on the 2-core VM), except that text holding a
carriage return is quoted too (``csv.writer`` with "\n" lines leaves it bare, and readers that
take "\r" for a line end split the row). The renderings:

* ``float``: the shortest repr; NaN (and None) empty;
* ``int``: its digits; None (and NaN) empty;
* ``bool``: 1 or 0; None empty;
* anything else (text, optional text, the per-core tuple): ``text``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

QUOTED = frozenset(',"\r\n')  # what csv.writer's QUOTE_MINIMAL quotes (with its defaults)


def text(value: Any) -> str:
    """One cell of any type: None empty, a tuple (per-core CPU) its percentages space-separated, text quoted where
    CSV needs it, a float as ``float`` columns are, anything else ``str``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return "" if value != value else repr(value)
    if isinstance(value, tuple):
        return " ".join(f"{v:.1f}" for v in value)
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"' if QUOTED.intersection(value) else value
    return str(value)


_RENDER = {
    "float": "{{'' if {v} is None or {v} != {v} else repr({v})}}",
    "int": "{{'' if {v} is None or {v} != {v} else {v}}}",
    "bool": "{{'' if {v} is None else 1 if {v} else 0}}",
}


def row_text(cls: type, columns: tuple[str, ...]) -> Callable[[Any], str]:
    """The function from a ``cls`` record to its CSV line (``columns`` in order, newline-terminated)."""
    types = {field.name: field.type for field in dataclasses.fields(cls)}
    cells = [_RENDER.get(types[name], "{{text({v})}}").format(v=f"r.{name}") for name in columns]
    return eval(f'lambda r: f"{",".join(cells)}\\n"', {"text": text, "repr": repr})  # noqa: S307 (our own source)
