"""Text from a record, made safe to print: its control characters escaped, its printable Unicode kept.

Labels, specs, the probe's fields, notices, paths and a lock file's holder come from files and pipes
other people (or their programs) wrote. Printed raw, an ESC or a carriage return in them moves the
cursor, recolours or rewrites the terminal, a bidirectional override reorders what it shows, and a lone
surrogate cannot be encoded at all; every place that prints such text calls :func:`printable`.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if char.isprintable():
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def printable(text: object) -> str:
    """``str(text)`` with what is not printable written as an escape (``\\e``, ``\\x07``, ``\\u202e``).

    Kept: every character Python calls printable (letters, marks, digits, punctuation, symbols, the space,
    in every script). Escaped: C0 and C1 controls (ESC, newline and tab included), format characters such as
    the bidirectional overrides, separators other than the space, surrogates, private-use and unassigned
    code points.
    """
    s = str(text)
    if s.isprintable():
        return s
    return "".join(_escaped(c) for c in s)
