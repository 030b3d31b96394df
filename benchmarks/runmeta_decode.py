"""What decoding run.json costs, by candidate: gpumon's fields-driven decoder (``core/records/jsonfields.py``) against
a pydantic 2 model of the same fields and bounds, and ``json.loads`` alone as the floor. Prints figures measured in
this run on a realistic run.json (a recorded two-job H100 run with its 100 notices and both jobs' output tails);
asserts nothing. msgspec is not measured: it is not installed here (it would be a compiled dependency of the base
install for a file read once per run).

    python benchmarks/runmeta_decode.py
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpumon.core.records.decode import loads  # noqa: E402
from gpumon.core.store.runmeta import MAX_BYTES, RunMeta  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "h100" / "20261123-032439-s-r50-vgg" / "run.json"
REPEATS = 2000


def realistic() -> bytes:
    """The sample run with the notices and tails a long, eventful run keeps (the recorder's maxima)."""
    meta = json.loads(SAMPLE.read_text())
    meta["notices"] = [
        {"t": round(1.5 + i * 0.25, 3), "process": "AB"[i % 2], "text": f"notice {i}: " + "x" * 60}
        for i in range(100)
    ]
    for w in meta["workloads"]:
        w["tail"] = "\n".join(f"epoch {i}: loss 0.{i:04d}" for i in range(40))
    return json.dumps(meta, indent=2).encode()


def pydantic_model() -> Any:
    """A pydantic 2 model of run.json with the bounds gpumon's decoder checks (finite, within range, enums)."""
    from pydantic import BaseModel, ConfigDict, Field

    finite = ConfigDict(allow_inf_nan=False, extra="ignore")
    day = 86_400.0

    class Gpu(BaseModel):
        model_config = finite
        index: Optional[int] = Field(None, ge=0, le=1024)
        name: Optional[str] = None
        uuid: Optional[str] = None
        driver: Optional[str] = None
        compute_mode: Optional[int] = Field(None, ge=0, le=16)
        pcie_gen: Optional[int] = Field(None, ge=0, le=64)
        pcie_width: Optional[int] = Field(None, ge=0, le=64)
        mem_total_mib: Optional[float] = Field(None, ge=0, le=1e9)
        pcie_method: Optional[Literal["gpm", "counters", "throughput"]] = None
        pcie_max_bps: Optional[float] = Field(None, ge=0, le=1e13)
        pcie_counter_bits: Optional[int] = Field(None, ge=0, le=128)
        pcie_poll_ms: Optional[float] = Field(None, ge=0, le=1e7)
        gpm_metrics: tuple[str, ...] = ()
        gpm_reason: str = ""
        unsupported: tuple[str, ...] = ()

    class Host(BaseModel):
        model_config = finite
        hostname: Optional[str] = None
        platform: Optional[str] = None
        cpus: Optional[int] = Field(None, ge=0, le=1 << 20)
        cpu_affinity: tuple[int, ...] = ()
        mem_total_mib: Optional[float] = Field(None, ge=0, le=1e9)

    class Workload(BaseModel):
        model_config = finite
        process: str = "?"
        spec: Optional[str] = None
        kind: Optional[str] = None
        argv: Optional[list[str]] = None
        pid: Optional[int] = Field(None, ge=0, le=1 << 32)
        user: Optional[str] = None
        command: Optional[str] = None
        owned: Optional[bool] = None
        attached: Optional[bool] = None
        probe: Optional[bool] = None
        start_t: Optional[float] = Field(None, ge=-1e3 * day, le=1e3 * day)
        stop_t: Optional[float] = Field(None, ge=-1e3 * day, le=1e3 * day)
        exit_status: Optional[int] = Field(None, ge=-255, le=255)
        state: Optional[
            Literal["starting", "running", "exited", "stopped", "failed", "detached", "not started"]
        ] = None
        reason: Optional[str] = None
        meta: Optional[dict[str, Any]] = None
        tail: Optional[str] = None

    class Notice(BaseModel):
        model_config = finite
        t: float = Field(0.0, ge=-1e3 * day, le=1e3 * day)
        process: Optional[str] = None
        text: str = ""
        kind: str = ""

    class Nvml(BaseModel):
        available: bool = False
        reason: str = ""

    class Run(BaseModel):
        model_config = finite
        schema_: Literal[1] = Field(alias="schema")
        label: Optional[str] = None
        mode: Optional[str] = None
        status: Optional[
            Literal["recording", "complete", "failed", "truncated", "running", "interrupted"]
        ] = None
        started_at: Optional[str] = None
        t0_monotonic_ns: Optional[int] = Field(None, ge=0, le=(1 << 63) - 1)
        duration_s: Optional[float] = Field(None, ge=0, le=1e3 * day)
        interval_ms: Optional[float] = Field(None, ge=0, le=1e7)
        device: Optional[str] = None
        host: Optional[Host] = None
        gpu: Optional[Gpu] = None
        nvml: Optional[Nvml] = None
        versions: Optional[dict[str, Any]] = None
        stagger_s: Optional[float] = Field(None, ge=0, le=1e3 * day)
        workloads: list[Workload] = Field(max_length=64)
        capture_start_t: float = Field(0.0, ge=0, le=1e3 * day)
        notices: Optional[list[Notice]] = Field(None, max_length=10_000)

    return Run


def per_call_us(fn: Any, data: bytes) -> float:
    """The median of 5 batches of REPEATS calls, in µs per call."""
    fn(data)
    batches = []
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(REPEATS):
            fn(data)
        batches.append((time.perf_counter() - began) / REPEATS * 1e6)
    return statistics.median(batches)


def main() -> None:
    data = realistic()
    model = pydantic_model()
    import pydantic

    cases = {
        "json.loads alone (no checks)": json.loads,
        "gpumon: decode.loads + RunMeta.from_json (dataclasses.fields)": lambda d: (
            RunMeta.from_json(loads(d, max_bytes=MAX_BYTES, walk=False))
        ),
        f"pydantic {pydantic.VERSION}: model_validate_json": model.model_validate_json,
    }
    print(
        f"run.json of {len(data):,} bytes; {platform.machine()}, Python {platform.python_version()}"
    )
    floor = None
    for name, fn in cases.items():
        us = per_call_us(fn, data)
        floor = floor or us
        print(f"  {name:<66} {us:8.1f} µs  ({us / floor:.1f}x json.loads)")


if __name__ == "__main__":
    main()
