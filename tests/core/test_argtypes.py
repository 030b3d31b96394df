"""The commands' argument types: --gpu, --share, --metrics (one implementation each; bad values: UsageError)."""

from __future__ import annotations

import pytest

from gpumon.commands import argtypes
from gpumon.core.records.share import ShareMode
from gpumon.errors import UsageError


def test_gpu_index_or_uuid() -> None:
    assert argtypes.gpu(" 1 ") == 1
    assert argtypes.gpu("GPU-0123") == "GPU-0123" and argtypes.gpu("MIG-ab") == "MIG-ab"
    for bad in ("-1", "first", "gpu-0123", ""):
        with pytest.raises(UsageError, match="expected a GPU index"):
            argtypes.gpu(bad)


def test_share_words_each_error_for_the_option() -> None:
    assert argtypes.share("mps:threads=30,70") == ShareMode("mps", threads=(30, 70))
    with pytest.raises(UsageError, match=r"^bad --share 'mig' \(choose timeslice, mps"):
        argtypes.share("mig")
    with pytest.raises(UsageError, match=r"^bad --share 'mps:threads=0,50': thread percentages"):
        argtypes.share("mps:threads=0,50")


def test_metrics_address() -> None:
    assert argtypes.metrics_address("9400") == ("127.0.0.1", 9400)
    assert argtypes.metrics_address("0.0.0.0:0") == ("0.0.0.0", 0)
    assert argtypes.metrics_address("[::1]:9400") == ("::1", 9400)
    for bad, why in (("x", "expected"), ("70000", "expected"), (":9400", "empty host")):
        with pytest.raises(UsageError, match=why):
            argtypes.metrics_address(bad)
