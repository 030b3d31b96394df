"""``--metrics``: a real Prometheus server scrapes a headless run on loopback; its numbers match steps.csv."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from gpumon.core.store.trace import load_run
from tests.helpers import GPUMON, gpumon, headless_cpu, only_run, wait_for

PROMETHEUS = shutil.which("prometheus")
SPAN_S = 8.0  # seconds of scrapes compared with steps.csv
READ_LAG_S = (
    3.0  # how far a scraped count may lag the steps taken (the probes are read once a second)
)
SCRAPE_S = 0.5  # a scrape's time is when it began: the count is read a moment later


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)["data"]["result"]
    except OSError:
        return []  # not up yet


def metrics_url(log: Path) -> str | None:
    for line in log.read_text().splitlines() if log.exists() else ():
        if line.startswith("gpumon: metrics at "):
            return line.removeprefix("gpumon: metrics at ")
    return None


def wall(started_at: str, t: float) -> float:
    return datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp() + t


@pytest.mark.skipif(
    PROMETHEUS is None, reason="no prometheus binary (apt-get install prometheus; .ci/run does)"
)
def test_prometheus_scrapes_iteration_rates_that_match_the_trace(tmp_path: Path) -> None:
    log = tmp_path / "gpumon.err"
    gpumon_proc = subprocess.Popen(
        [
            *GPUMON,
            *headless_cpu(
                tmp_path / "runs",
                "fcn:threads=1",
                "--duration",
                "240",
                "--metrics",
                "0",
            ),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
    )
    prometheus = None
    try:
        url = wait_for(lambda: metrics_url(log), timeout=60, what="gpumon's metrics address")
        target = urllib.parse.urlparse(url).netloc
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n"
            f"  - job_name: gpumon\n    static_configs:\n      - targets: ['{target}']\n"
        )
        web = f"127.0.0.1:{free_port()}"
        prometheus = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address={web}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "prometheus.log", "w"),
        )
        base = f"http://{web}"
        # the counter's scrapes over the last minute, once they span SPAN_S of steady steps
        series = 'gpumon_job_iterations_total{slot="A"}[1m]'

        def spanned() -> list | None:
            result = query(base, series)
            values = result[0]["values"] if result else []
            steady = [(float(t), float(v)) for t, v in values if float(v) > 10]
            return steady if len(steady) >= 2 and steady[-1][0] - steady[0][0] >= SPAN_S else None

        samples = wait_for(
            spanned, timeout=120, interval=0.5, what=f"{SPAN_S:.0f} s of scrapes in Prometheus"
        )
        gauge = query(
            base, 'gpumon_job_iterations_per_second{slot="A"}[1m]'
        )  # each scrape: its time, its value
    finally:
        gpumon_proc.send_signal(signal.SIGINT)
        gpumon_proc.wait(60)
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(30)

    labels = gauge[0]["metric"]
    assert (
        labels["job"] == "gpumon"
        and labels["slot"] == "A"
        and labels["workload"] == "fcn:threads=1"
    )
    assert (
        labels["Hostname"] == socket.gethostname()
    )  # no GPU here: Prometheus drops the empty gpu/UUID labels

    run = load_run(only_run(tmp_path / "runs"))
    (t1, _), (t2, _) = samples[0], samples[-1]
    steps = run.steps()
    walls = steps["t"].map(lambda t: wall(run.meta.started_at, t))
    taken = sorted(walls)
    # each scrape's counter is the steps taken by then, less those the monitor had not read yet: headless reads
    # the probes once a status line, so a count lags its steps by up to a second (more on a loaded box), and over
    # 8 s of scrapes a rate from two counts was off by up to 2 s / 8 s (CI: 11 % against a 10 % bound)
    for t, count in samples:
        assert bisect.bisect_right(taken, t - READ_LAG_S) <= count, (t, count)
        assert count <= bisect.bisect_right(taken, t + SCRAPE_S), (t, count)
    assert ((walls > t1) & (walls <= t2)).sum() > 0  # the span held steps
    # the gauge is the rate over the 2 s before each scrape: against the steps of those 2 s, scrape by scrape (a
    # loaded box's rate moves between them), the median of the ratios
    ratios = []
    for t, value in ((float(t), float(v)) for t, v in gauge[0]["values"]):
        counted = ((walls > t - 2) & (walls <= t)).sum() / 2
        if t1 <= t <= t2 and counted > 0:
            ratios.append(value / counted)
    assert len(ratios) >= 3, gauge[0]["values"]
    assert abs(statistics.median(ratios) - 1) <= 0.25, ratios  # 2 s windows of a noisy CPU job


def test_metrics_address_errors_are_one_line(tmp_path: Path) -> None:
    for bad in ("nope", "70000", "host:"):
        result = gpumon(
            "run", "--cmd", "true", "--headless", "--metrics", bad, "--out", str(tmp_path)
        )
        assert result.returncode == 2 and result.stderr.startswith(
            "gpumon: error: bad --metrics"
        ), result.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = gpumon(
            "run",
            "--cmd",
            "true",
            "--headless",
            "--metrics",
            str(port),
            "--out",
            str(tmp_path / "runs"),
        )
    assert result.returncode == 1, "a taken port is the machine, not bad input"
    assert (
        result.stderr.strip()
        == f"gpumon: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use"
    )
    assert not (tmp_path / "runs").exists()


def test_the_endpoint_lives_only_as_long_as_the_run(tmp_path: Path) -> None:
    log = tmp_path / "err"
    result = subprocess.run(
        [
            *GPUMON,
            "run",
            "--cmd",
            "true",
            "--headless",
            "--metrics",
            "0",
            "--out",
            str(tmp_path / "runs"),
        ],
        stderr=open(log, "w"),
        stdout=subprocess.DEVNULL,
        timeout=120,
        env=os.environ,
    )
    assert result.returncode == 0
    port = urllib.parse.urlparse(metrics_url(log)).port
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_exposition_uses_dcgm_exporter_labels_units_and_total_counters() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from gpumon.core.capture.metrics import RunMetrics
    from gpumon.core.interference.live import LiveNow, LiveStats
    from gpumon.core.records.bus import Bus
    from gpumon.core.records.model import DeviceSample, StepBatch, StepEvent, WorkloadState

    labels = {
        "gpu": "0",
        "UUID": "GPU-1234",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "box",
    }
    bus = Bus()
    metrics = RunMetrics(lambda: 10.0, labels, LiveStats(bus=bus), exclusive={"A": 40.0, "B": 20.0})
    bus.subscribe(metrics.handle, *RunMetrics.TAKES)
    published: list[LiveNow] = []
    bus.subscribe(published.append, LiveNow)
    for slot, spec in (("A", "fcn"), ("B", "vgg19")):
        metrics.name_job(slot, spec)
        bus.publish(WorkloadState(slot, "running", 0.0, pid=1))
    registry = CollectorRegistry()
    registry.register(metrics)
    steps = (
        6 * 20
    )  # 6 s together: a window that can hold a verdict (MIN_OVERLAP_S, MIN_OVERLAP_STEPS of each)
    for i in range(steps):  # A at 20 it/s (r = 2), B at 10 it/s (r = 2): STP 1.0
        bus.publish(
            StepBatch.of(
                StepEvent(
                    "A", 1, i, 4.0 + i / 20 + 0.05, 0.05, samples=64, copy_bytes=1000, copy_s=1e-6
                )
            )
        )
        if i % 2 == 0:
            bus.publish(StepBatch.of(StepEvent("B", 2, i // 2, 4.0 + i / 20 + 0.1, 0.1)))
        if i == 40:  # 2 s in: still measuring, so no slowdown, STP nor verdict yet
            early = generate_latest(registry).decode()
            assert "gpumon_job_slowdown_ratio{" not in early and "gpumon_pair_verdict{" not in early
    bus.publish(
        DeviceSample(10.0, gpu_util=97.0, mem_used_mib=1024.0, pcie_rx_bps=5e9, sm_clock_mhz=1980.0)
    )
    published.clear()
    text = generate_latest(registry).decode()
    job = 'Hostname="box",UUID="GPU-1234",device="nvidia0",gpu="0",modelName="NVIDIA H100 80GB HBM3",slot="A",workload="fcn"'
    assert f"gpumon_job_iterations_total{{{job}}} 120.0" in text
    assert f"gpumon_job_copy_bytes_total{{{job}}} 120000.0" in text
    device = (
        'Hostname="box",UUID="GPU-1234",device="nvidia0",gpu="0",modelName="NVIDIA H100 80GB HBM3"'
    )
    assert f"gpumon_gpu_utilization_ratio{{{device}}} 0.97" in text
    assert f"gpumon_gpu_memory_used_bytes{{{device}}} 1.073741824e+09" in text
    assert f"gpumon_gpu_sm_clock_hertz{{{device}}} 1.98e+09" in text
    assert "gpumon_gpu_power_watts" not in text  # NaN: not reported rather than a made-up value
    assert "gpumon_job_slowdown_ratio{" in text and "gpumon_pair_stp_ratio{" in text
    assert f'gpumon_pair_verdict{{{device},verdict="cannot tell"}} 1.0' in text
    (scraped,) = (
        published  # the scrape asked the session's one live computation, which published its answer
    )
    assert scraped.t == 10.0 and scraped.running == ("A", "B") and set(scraped.shared) == {"A", "B"}


def test_the_grafana_dashboard_names_only_metrics_that_exist() -> None:
    import re

    from gpumon.core.capture import metrics

    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "docs" / "grafana-gpumon.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]
    named = {name for e in exprs for name in re.findall(r"\b(gpumon_[a-z_]+)", e)}
    source = Path(metrics.__file__).read_text()
    exposed = {name for name in named if f'"{name.removesuffix("_total")}"' in source}
    assert named and named == exposed, named - exposed
    assert any(
        "DCGM_FI_DEV_GPU_UTIL" in e for e in exprs
    )  # device panels from dcgm-exporter's names
