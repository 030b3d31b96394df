"""Hopper's GPU performance monitoring (GPM) through pynvml: one sample per tick, metrics between two.

Costs measured on the H100 (tests/fakenvml/h100/gpm.txt, also in docs/nvml.md):
``nvmlGpmSampleGet`` 53 µs idle, 400 µs busy; ``nvmlGpmMetricsGet`` for PCIe RX/TX, SM
activity, occupancy and DRAM bandwidth 7-10 µs, but 1,756 µs for a set holding graphics (1)
or tensor (5) activity. So graphics activity is never read (NVML's gpu_util says the same),
and tensor activity alone every ``TENSOR_PERIOD_S``, averaged over that whole window.
"""

from __future__ import annotations

import ctypes
import logging
import math
import struct
from types import ModuleType
from typing import Any

LOG = logging.getLogger(__name__)
NAN = math.nan
MIB = 1024 * 1024

# DeviceSample field -> (GPM metric id, scale to the field's unit).
TICK_METRICS: dict[str, tuple[int, float]] = {
    "pcie_rx_bps": (21, MIB),  # NVML_GPM_METRIC_PCIE_RX_PER_SEC, MiB/s
    "pcie_tx_bps": (20, MIB),  # NVML_GPM_METRIC_PCIE_TX_PER_SEC, MiB/s
    "sm_active_pct": (2, 1.0),  # NVML_GPM_METRIC_SM_UTIL
    "sm_occupancy_pct": (3, 1.0),  # NVML_GPM_METRIC_SM_OCCUPANCY
    "dram_bw_pct": (10, 1.0),  # NVML_GPM_METRIC_DRAM_BW_UTIL
}
TENSOR_FIELD, TENSOR_METRIC = (
    "tensor_active_pct",
    5,
)  # NVML_GPM_METRIC_ANY_TENSOR_UTIL (the dear one)
TENSOR_PERIOD_S = 5.0
# Errors after which a metric (or GPM as a whole) is not asked again.
PERMANENT = frozenset({3, 4, 13})  # NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND


class Gpm:
    """GPM samples of one device: three buffers (previous, current, tensor-window anchor)."""

    def __init__(self, nv: ModuleType, handle: Any) -> None:
        self._nv = nv
        self._handle = handle
        self._samples: list[Any] = []
        self._prev: Any = None
        self._anchor: Any = None
        self._anchor_t = -math.inf
        self.fields: list[str] = []  # DeviceSample fields whose metric works
        self.failed: str | None = None  # why GPM stopped, once it has
        self._tensor = NAN
        self._requests: dict[
            tuple[int, ...], tuple[Any, struct.Struct]
        ] = {}  # metric ids -> request (19 KB), layout

    def open(self, t: float) -> str | None:
        """Allocate the samples and find which metrics work; None if usable, else why not."""
        nv = self._nv
        try:
            if not nv.nvmlGpmQueryDeviceSupport(self._handle).isSupportedDevice:
                return "GPM not supported on this GPU (Hopper or newer only)"
            self._samples = [nv.nvmlGpmSampleAlloc() for _ in range(3)]
            first, second = self._samples[0], self._samples[1]
            nv.nvmlGpmSampleGet(self._handle, first)
            nv.nvmlGpmSampleGet(self._handle, second)
            wanted = {**TICK_METRICS, TENSOR_FIELD: (TENSOR_METRIC, 1.0)}
            ids = [m for m, _ in wanted.values()]
            try:
                codes = self._metrics(first, second, ids)
            except nv.NVMLError as err:
                if err.value in PERMANENT:
                    raise
                # Two samples microseconds apart may be refused as a pair: keep every metric for now;
                # the per-metric codes of the first ticks drop those that do not work.
                LOG.info(
                    "gpm: probe of the metrics failed (%s); deciding per metric while sampling", err
                )
                codes = dict.fromkeys(ids, (nv.NVML_SUCCESS, NAN))
        except nv.NVMLError as err:
            self.close()
            return f"GPM unusable: {err}"
        except AttributeError as err:  # a pynvml without GPM wrappers
            self.close()
            return f"GPM unusable: {err}"
        self.fields = [f for f, (m, _) in wanted.items() if codes[m][0] == nv.NVML_SUCCESS]
        self._prev = self._anchor = second
        self._anchor_t = t
        return None if self.fields else "no GPM metric works on this GPU"

    def close(self) -> None:
        """Free the samples (idempotent)."""
        for sample in self._samples:
            try:
                self._nv.nvmlGpmSampleFree(sample)
            except self._nv.NVMLError as err:
                LOG.debug("gpm: free: %s", err)
        self._samples, self._prev, self._anchor = [], None, None

    def _metrics(self, first: Any, second: Any, ids: list[int]) -> dict[int, tuple[int, float]]:
        """metric id -> (nvmlReturn, value) between two samples."""
        nv = self._nv
        request, results = self._requests.get(tuple(ids)) or self._request(ids)
        request.sample1, request.sample2 = first, second
        nv.nvmlGpmMetricsGet(request)
        flat = results.unpack_from(request)
        return {flat[i]: (flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)}

    def _request(self, ids: list[int]) -> tuple[Any, struct.Struct]:
        """The request for these metrics, and the layout of its first ``len(ids)`` results (id, return, value), read
        in one unpack: through pynvml's structures each field is an attribute lookup (17 of the 23 µs a tick took)."""
        nv = self._nv
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        for i, metric in enumerate(ids):
            request.metrics[i].metricId = metric
        metric_t, first = nv.c_nvmlGpmMetric_t, nv.c_nvmlGpmMetricsGet_t.metrics.offset
        fields = (metric_t.metricId, metric_t.nvmlReturn, metric_t.value)
        layout, at = "=", 0
        for i in range(len(ids)):
            for column, code in zip(fields, "IId"):
                offset = first + i * ctypes.sizeof(metric_t) + column.offset
                layout, at = layout + "x" * (offset - at) + code, offset + column.size
        self._requests[tuple(ids)] = request, struct.Struct(layout)
        return self._requests[tuple(ids)]

    def read(self, t: float) -> dict[str, float]:
        """One sample now; each working field's value since the previous sample (NaN where it failed)."""
        out = dict.fromkeys(self.fields, NAN)
        if self.failed or self._prev is None:
            return out
        nv = self._nv
        current = next(s for s in self._samples if s is not self._prev and s is not self._anchor)
        try:
            nv.nvmlGpmSampleGet(self._handle, current)
            tick = [f for f in self.fields if f in TICK_METRICS]
            codes = self._metrics(self._prev, current, [TICK_METRICS[f][0] for f in tick])
            for field in tick:
                metric, scale = TICK_METRICS[field]
                self._take(out, field, codes[metric], scale)
            if TENSOR_FIELD in self.fields and t - self._anchor_t >= TENSOR_PERIOD_S:
                code, value = self._metrics(self._anchor, current, [TENSOR_METRIC])[TENSOR_METRIC]
                self._tensor = value if code == nv.NVML_SUCCESS else NAN
                self._drop_if_permanent(TENSOR_FIELD, code)
                self._anchor, self._anchor_t = current, t
        except nv.NVMLError as err:
            if err.value in PERMANENT or err.value in (
                15,
                16,
            ):  # GPU lost / reset required: stop too
                self.failed = f"GPM failed: {err}"
                LOG.info("gpm: %s; PCIe falls back to the byte counters", self.failed)
            return out
        self._prev = current
        if TENSOR_FIELD in self.fields:
            out[TENSOR_FIELD] = self._tensor
        return out

    def _take(
        self, out: dict[str, float], field: str, result: tuple[int, float], scale: float
    ) -> None:
        code, value = result
        if code == self._nv.NVML_SUCCESS and math.isfinite(value):
            out[field] = value * scale
        else:
            self._drop_if_permanent(field, code)

    def _drop_if_permanent(self, field: str, code: int) -> None:
        if code in PERMANENT and field in self.fields:
            self.fields.remove(field)
            LOG.info("gpm: %s no longer read: NVML error %d", field, code)
