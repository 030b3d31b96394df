"""How a job's spec reads on a line or a panel title: a ``--cmd`` spec shows its script first, its command after
with the interpreter's and the script's folders shortened (``main.py (python …/word_language_model/main.py
--lr 20)``), so a narrow line keeps the name that tells the jobs apart; a built-in spec reads as it is."""

from __future__ import annotations

import os
import shlex

CMD = "cmd:"


def _script(words: list[str]) -> int | None:
    """The index of the script (``x.py``) or module (after ``-m``) in a command's words; None if neither."""
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words):
            return i + 1
        if word.endswith(".py"):
            return i
    return None


def shown_spec(spec: str) -> str:
    """``spec`` as the monitor and the status lines show it (run.json keeps it whole)."""
    if not spec.startswith(CMD):
        return spec
    try:
        words = shlex.split(spec[len(CMD) :])
    except ValueError:  # unbalanced quotes: as it was given
        return spec
    at = _script(words)
    if not words or at is None:
        return spec
    script = words[at]
    folder, name = os.path.split(script)
    if folder:
        parent = os.path.basename(folder.rstrip("/"))
        words[at] = f"…/{parent}/{name}" if parent and parent != folder else script
    if os.sep in words[0]:
        words[0] = os.path.basename(words[0])
    if words[at] == name and len(words) == 2:  # ``python train.py``: the name says it all
        return name
    return f"{name} ({' '.join(words)})"
