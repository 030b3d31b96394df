"""The device panel's GPM line: Hopper's SM active, occupancy, DRAM bandwidth and link %, and runs without them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from gpumon.core.records.model import DEVICE_COLUMNS, GPM_COLUMNS
from gpumon.tui.app import ViewerApp
from gpumon.tui.screens.replay import ReplayScreen, open_replay
from gpumon.tui.widgets.lines import TextLine
from tests.tui.conftest import run_async
from tests.helpers import wait_until
from tests.tracegen import staggered_pair

GPM = {
    "sm_active_pct": 95.7,
    "sm_occupancy_pct": 14.1,
    "dram_bw_pct": 23.9,
    "tensor_active_pct": 92.9,
}
LINK_BPS = 63.0e9  # Gen5 x16: 16 x 3.938 GB/s


def _rewrite(
    root: Path, columns: tuple[str, ...], values: dict[str, float], gpu: dict[str, object]
) -> Path:
    """The generated GPU run, its device.csv laid out as ``columns`` (``values`` filled in), run.json's gpu updated."""
    with open(root / "device.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(root / "device.csv", "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([values.get(c, row.get(c) or "") for c in columns])
    meta = json.loads((root / "run.json").read_text())
    meta["gpu"] = {k: v for k, v in {**meta["gpu"], **gpu}.items() if v is not None}
    (root / "run.json").write_text(json.dumps(meta))
    return root


async def _gpm_line(root: Path, size: tuple[int, int]) -> str:
    source, feed = open_replay(root)
    source.seek(20.0)
    app = ViewerApp(ReplayScreen(source, feed, play=False))
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.screen.frames > 0, what="a frame")
        line = app.screen.query_one("#gpm", TextLine)
        assert line.display and line.region.height == 1, "the line is on screen"
        return line.plain


@run_async
async def test_panel_shows_gpm_figures_and_link_percent(tmp_path):
    gpu = {"gpm_metrics": list(GPM_COLUMNS), "pcie_max_bps": LINK_BPS, "pcie_method": "gpm"}
    root = _rewrite(
        staggered_pair(tmp_path / "run", gpu=True),
        DEVICE_COLUMNS,
        {**GPM, "pcie_rx_bps": 31.5e9},
        gpu,
    )
    wide = await _gpm_line(root, (120, 40))
    for expected in ("SM active 96%", "occupancy 14%", "DRAM bw 24%", "tensor 93%", "link RX 50%"):
        assert expected in wide, wide
    narrow = await _gpm_line(root, (80, 24))
    assert "SM active 96%" in narrow and "link RX 50%" in narrow, narrow
    assert len(narrow) <= 76, "fits inside the panel at 80 columns (tensor dropped first)"


@run_async
async def test_run_recorded_before_gpm_reads_no_gpm_and_link_from_gen_and_width(tmp_path):
    old_columns = tuple(c for c in DEVICE_COLUMNS if c not in GPM_COLUMNS)
    root = _rewrite(
        staggered_pair(tmp_path / "run", gpu=True),
        old_columns,
        {"pcie_rx_bps": 3.1504e9},
        {"pcie_gen": 4, "pcie_width": 16, "gpm_metrics": None, "pcie_max_bps": None},
    )
    line = await _gpm_line(root, (120, 40))
    assert "n/a (no GPM)" in line and "SM active 96%" not in line, line
    assert "link RX 10%" in line, line  # 3.15 GB/s of Gen4 x16's 31.5 GB/s
