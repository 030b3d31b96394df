"""The live monitor replaying a real capture: resnet50 + vgg19 sharing one H100 (tests/data/h100/).

The runs were recorded before the GPM columns existed, so this is also the "old runs still
read" case. Each job's exclusive H100 capture is its baseline, as `--baseline` would set it, so
the interference line shows the real slowdowns. The replay reads copies under the test's tmp dir.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpumon.core.store.trace import baseline_rate
from gpumon.tui.app import ViewerApp
from gpumon.tui.screens.replay import ReplayScreen, open_replay
from tests.helpers import wait_until

H100 = Path(__file__).parents[1] / "data" / "h100"
SHARED = "20261123-032439-s-r50-vgg"
BASELINES = {"A": "20261123-032320-x-resnet50", "B": "20261123-032346-x-vgg19"}
AT_T = 22.0  # both jobs past warm-up, near the end of the trimmed overlap
SIZES = [(80, 24), (120, 40)]


def h100_replay(runs: Path, at_t: float = AT_T) -> ViewerApp:
    """The app replaying the shared H100 run in ``runs``, seeked to ``at_t``, with both baselines."""
    source, feed = open_replay(runs / SHARED)
    for slot, name in BASELINES.items():
        feed.model.set_baseline(slot, baseline_rate(slot, runs / name), f"baseline {name}")
    source.seek(at_t)
    return ViewerApp(ReplayScreen(source, feed, play=False))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_h100_shared_replay(snap_compare, tmp_path, size):
    for name in (SHARED, *BASELINES.values()):
        shutil.copytree(H100 / name, tmp_path / name)

    async def first_frame(pilot) -> None:
        await wait_until(
            pilot, lambda: getattr(pilot.app.screen, "frames", 0) > 0, what="the first frame"
        )

    assert snap_compare(h100_replay(tmp_path), terminal_size=size, run_before=first_frame)
