"""The recorder's CSV lines: what csv.writer writes from the same cells, for every table and awkward values."""

from __future__ import annotations

import csv
import io
import math

import pandas as pd
import pytest

from gpumon.core import model
from gpumon.core.recorder import OTHER_ROW, ROWS, TABLES
from gpumon.core.rowtext import text


def reference(values: tuple) -> str:
    """The recorder's rows before rowtext: NaN and None empty, booleans 0/1, tuples joined, then csv.writer."""
    cells = [
        "" if v is None or v != v else int(v) if v is True or v is False
        else " ".join(f"{c:.1f}" for c in v) if type(v) is tuple else v
        for v in values
    ]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()


NAN = math.nan
RECORDS = [
    model.StepEvent("A", 4242, 0, 0.1, 0.25, 8.0, True, 1024, 0.001),
    model.StepEvent("B", 7, 123456, 12.365678899999999, 1e-07, NAN, False, 0, NAN),
    model.StepEvent("A", 7, 5, -0.5, 3.0, 64, False, 2**40, NAN),  # an int in a float column stays an int
    model.DeviceSample(1.5, 100.0, 52.0, 11378.5, 81559.0, 8.7e8, 2.4e8, 517.25, 49.0, 1980.0, NAN, NAN, 24.0, NAN),
    model.ProcessSample(0.5, "A", 99, 180.3, 412.0, 12, NAN, NAN),
    model.HostSample(2.0, 37.5, 1000.25, 24000.0, (12.5, 100.0, 0.0)),
    model.HostSample(2.0, 37.5, 1000.25, 24000.0, ()),
]
OTHERS = [
    model.OtherGpuProcess(1.0, 31337, 2048.0, 40.0, "alice", 'python -c "print(1, 2)"', 99.5, 300.0, 12.0),
    model.OtherGpuProcess(1.0, 31338, NAN, NAN, None, None, NAN, NAN, NAN),
    model.OtherGpuProcess(1.0, 31339, 1.0, 0.0, "bob", "train\nnew line, comma", 0.0, 1.0, 0.5),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_each_table_line_is_what_csv_writer_wrote(record):
    table, line = ROWS[type(record)]
    columns = next(c for _, t, c in TABLES if t == table)
    assert line(record) == reference(tuple(getattr(record, c) for c in columns))


@pytest.mark.parametrize("other", OTHERS, ids=["quoted", "hidden", "newline"])
def test_other_process_lines_quote_their_text_as_csv_writer_does(other):
    assert OTHER_ROW(other) == reference(tuple(getattr(other, c) for c in model.OTHER_COLUMNS))
    read = pd.read_csv(io.StringIO(",".join(model.OTHER_COLUMNS) + "\n" + OTHER_ROW(other)), keep_default_na=False)
    assert len(read) == 1 and read["command"][0] == (other.command or "")


def test_a_carriage_return_is_quoted_so_that_readers_keep_the_row_whole():
    assert text("a\rb") == '"a\rb"'
    assert text('say "hi", twice') == '"say ""hi"", twice"' and text("plain") == "plain" and text(None) == ""
