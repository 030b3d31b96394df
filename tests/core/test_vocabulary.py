"""One vocabulary (issue 34): every rate's definition is written once (core/records/rates.py DEFINITIONS), and
docs/numbers.md, the monitor's help screen and ``gpumon compare --help`` say it word for word."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gpumon.core.records.rates import DEFINITIONS
from gpumon.tui.screens.help import MEANINGS

ROOT = Path(__file__).resolve().parents[2]
# What the help and the docs said before there was one definition: each contradicted another place.
RETIRED = (
    "step count / time inside the steps",
    "its iter/s now",
    "Sharing pays when STP > 1 (r_AB·r_BA",
)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_docs_numbers_table_is_the_definitions_word_for_word():
    rows = re.findall(
        r"^\| \*\*(.+?)\*\* \| (.+?) \|$", (ROOT / "docs" / "numbers.md").read_text(), re.M
    )
    assert dict(rows) == dict(DEFINITIONS)


def test_the_help_screen_says_the_definitions_the_docs_say():
    doc = dict(
        re.findall(
            r"^\| \*\*(.+?)\*\* \| (.+?) \|$", (ROOT / "docs" / "numbers.md").read_text(), re.M
        )
    )
    help_says = dict(MEANINGS)
    for term, text in doc.items():
        assert help_says.get(term) == text + ".", term


def test_compare_help_says_every_definition():
    shown = flat(
        subprocess.run(
            [sys.executable, "-m", "gpumon", "compare", "--help"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    for term, text in DEFINITIONS:
        assert f"{term} {flat(text)}" in shown, term


def test_no_other_definition_is_left_in_the_help_and_the_docs():
    texts = {
        "help": " ".join(text for _, text in MEANINGS),
        **{p.name: p.read_text() for p in (ROOT / "README.md", *(ROOT / "docs").glob("*.md"))},
    }
    for name, text in texts.items():
        for phrase in RETIRED:
            assert phrase not in text, (name, phrase)
