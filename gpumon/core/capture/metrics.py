"""Prometheus exposition of a run's live numbers (``gpumon run ... --metrics [HOST:]PORT``).

A collector computes every value when Prometheus scrapes, from what the session's bus already
carries: nothing extra is sampled. Labels follow dcgm-exporter's (``gpu``, ``UUID``, ``device``,
``modelName``, ``Hostname``) so a dashboard can put gpumon's job panels beside dcgm-exporter's
device panels; units are in the metric names and counters end in ``_total``. Details: docs/fleet.md.
"""

from __future__ import annotations

import math
import socket
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector

from gpumon.core.capture.boundedhttp import serve
from gpumon.core.records.bus import Bus
from gpumon.core.interference.live import LiveStats
from gpumon.core.records.model import DeviceSample, StepBatch
from gpumon.core.records.rates import VERDICTS, Interference, interference
from gpumon.errors import EnvironmentFailure

MIB = 1024 * 1024
DEVICE_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")
JOB_LABELS = (*DEVICE_LABELS, "slot", "workload")
# (metric, DeviceSample field, scale to the unit in the name, help)
DEVICE_GAUGES = (
    (
        "gpumon_gpu_utilization_ratio",
        "gpu_util",
        0.01,
        "fraction of time a kernel was running (NVML)",
    ),
    (
        "gpumon_gpu_memory_utilization_ratio",
        "mem_util",
        0.01,
        "fraction of time device memory was read or written",
    ),
    ("gpumon_gpu_memory_used_bytes", "mem_used_mib", MIB, "device memory in use"),
    ("gpumon_gpu_memory_total_bytes", "mem_total_mib", MIB, "device memory in all"),
    (
        "gpumon_gpu_pcie_rx_bytes_per_second",
        "pcie_rx_bps",
        1.0,
        "PCIe bytes received by the GPU (host to device)",
    ),
    (
        "gpumon_gpu_pcie_tx_bytes_per_second",
        "pcie_tx_bps",
        1.0,
        "PCIe bytes sent by the GPU (device to host)",
    ),
    ("gpumon_gpu_power_watts", "power_w", 1.0, "board power draw"),
    ("gpumon_gpu_temperature_celsius", "temp_c", 1.0, "GPU temperature"),
    ("gpumon_gpu_sm_clock_hertz", "sm_clock_mhz", 1e6, "SM clock"),
    (
        "gpumon_gpu_sm_active_ratio",
        "sm_active_pct",
        0.01,
        "fraction of SM cycles with a warp resident (GPM)",
    ),
    (
        "gpumon_gpu_sm_occupancy_ratio",
        "sm_occupancy_pct",
        0.01,
        "resident warps over the SMs' maximum (GPM)",
    ),
    (
        "gpumon_gpu_dram_bandwidth_ratio",
        "dram_bw_pct",
        0.01,
        "DRAM bandwidth used over its peak (GPM)",
    ),
    (
        "gpumon_gpu_tensor_active_ratio",
        "tensor_active_pct",
        0.01,
        "fraction of cycles the tensor cores were busy (GPM)",
    ),
)


@dataclass
class _Job:
    spec: str = ""
    steps: int = 0
    copy_bytes: int = 0


@dataclass(eq=False)
class RunMetrics:
    """What the collector reads at scrape time: counters and the device sample fed from the bus (only appends and
    assignments), and the session's live computation (``live``: rates, which jobs run, the overlap), asked then."""

    clock: Callable[[], float]
    labels: dict[str, str]
    live: LiveStats
    exclusive: dict[str, float] = field(default_factory=dict)
    device: DeviceSample | None = None
    jobs: dict[str, _Job] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    TAKES = (StepBatch, DeviceSample)  # what ``handle`` reads (Bus.subscribe)

    def handle(self, item: object) -> None:
        if isinstance(item, StepBatch):
            with self._lock:
                job = self.jobs.setdefault(item.slot, _Job())
                job.steps += len(item.steps)
                job.copy_bytes += sum(step.copy_bytes for step in item.steps)
        elif isinstance(item, DeviceSample):
            self.device = item

    def name_job(self, slot: str, spec: str) -> None:
        """The workload spec of ``slot`` (a new workload in a slot starts its counters at zero)."""
        with self._lock:
            self.jobs[slot] = _Job(spec=spec)

    def collect(self) -> Iterator[Metric]:
        base = [self.labels.get(k, "") for k in DEVICE_LABELS]
        yield from self._device_families(base)
        live = self.live.now(self.clock())
        with self._lock:
            jobs = {
                slot: (job.spec, job.steps, job.copy_bytes)
                for slot, job in sorted(self.jobs.items())
            }
        families = job_families()
        running = []
        for slot, (spec, steps, copy_bytes) in jobs.items():
            labels = [*base, slot, spec]
            families["steps"].add_metric(labels, steps)
            families["copy"].add_metric(labels, copy_bytes)
            f = live.figures.get(slot)
            if slot not in live.running or f is None:
                continue
            running.append(slot)
            for key, value in (
                ("rate", f.iter_per_s),
                ("samples", f.samples_per_s),
                ("bandwidth", f.copy_bandwidth),
                ("wall", f.copy_bytes_per_s),
            ):
                if not math.isnan(value):
                    families[key].add_metric(labels, value)
        if self.exclusive and len(running) > 1 and live.overlap is not None:
            # no r, STP nor verdict before it can hold one
            result = interference(self.exclusive, live.overlap)
            for slot, r in result.slowdown.items():
                if not math.isnan(r):
                    families["slowdown"].add_metric([*base, slot, jobs[slot][0]], r)
            yield from pair_families(base, result)
        yield from families.values()

    def _device_families(self, base: list[str]) -> Iterator[Metric]:
        """One gauge per device figure the last sample holds (none for a figure it could not read)."""
        sample = self.device
        for name, attr, scale, text in DEVICE_GAUGES:
            value = getattr(sample, attr, math.nan) if sample is not None else math.nan
            if not math.isnan(value):
                family = GaugeMetricFamily(name, text, labels=DEVICE_LABELS)
                family.add_metric(base, value * scale)
                yield family


def job_families() -> dict[str, CounterMetricFamily | GaugeMetricFamily]:
    """The per-job families, empty, by the key ``collect`` fills them under."""
    return {
        "steps": CounterMetricFamily(
            "gpumon_job_iterations", "training steps the probe reported", labels=JOB_LABELS
        ),
        "copy": CounterMetricFamily(
            "gpumon_job_copy_bytes", "bytes the job copied host to device", labels=JOB_LABELS
        ),
        "rate": GaugeMetricFamily(
            "gpumon_job_iterations_per_second",
            "iterations per second over the last 2 s",
            labels=JOB_LABELS,
        ),
        "samples": GaugeMetricFamily(
            "gpumon_job_samples_per_second",
            "training samples per second over the last 2 s",
            labels=JOB_LABELS,
        ),
        "bandwidth": GaugeMetricFamily(
            "gpumon_job_copy_bandwidth_bytes_per_second",
            "bytes per second of the copies themselves (includes time-slice waits under sharing)",
            labels=JOB_LABELS,
        ),
        "wall": GaugeMetricFamily(
            "gpumon_job_copy_throughput_bytes_per_second",
            "bytes copied per second of wall time",
            labels=JOB_LABELS,
        ),
        "slowdown": GaugeMetricFamily(
            "gpumon_job_slowdown_ratio",
            "exclusive rate over the rate while sharing (2 = half speed)",
            labels=JOB_LABELS,
        ),
    }


def pair_families(base: list[str], result: Interference) -> Iterator[Metric]:
    """The pair's STP and a one-hot verdict, once the interference holds an STP."""
    if math.isnan(result.stp):
        return
    stp = GaugeMetricFamily(
        "gpumon_pair_stp_ratio",
        "system throughput: sum of 1/slowdown (above 1: sharing pays)",
        labels=DEVICE_LABELS,
    )
    stp.add_metric(base, result.stp)
    yield stp
    verdict = GaugeMetricFamily(
        "gpumon_pair_verdict",
        "1 for the current verdict on sharing",
        labels=(*DEVICE_LABELS, "verdict"),
    )
    for v in VERDICTS:
        verdict.add_metric([*base, v], 1.0 if v == result.verdict else 0.0)
    yield verdict


class MetricsServer:
    """An HTTP /metrics endpoint over a run's bus, alive while the session is (its connections bounded and
    timed out: core/capture/boundedhttp.py)."""

    def __init__(
        self, host: str, port: int, bus: Bus, clock: Callable[[], float], live: LiveStats
    ) -> None:
        """``live``: the session's live computation (it lives on ``bus`` too)."""
        self.metrics = RunMetrics(clock, {}, live)
        registry = CollectorRegistry()
        registry.register(self.metrics)
        ProcessCollector(registry=registry)  # gpumon's own CPU and memory: what watching costs
        try:
            self._server, self._thread = serve(host, port, make_wsgi_app(registry))
        except (OSError, socket.gaierror) as exc:
            raise EnvironmentFailure(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
            ) from None
        self._unsubscribe = bus.subscribe(self.metrics.handle, *RunMetrics.TAKES)

    @property
    def url(self) -> str:
        address, port = self._server.server_address[:2]
        host = address.decode() if isinstance(address, bytes) else address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    def close(self) -> None:
        self._unsubscribe()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2.0)
