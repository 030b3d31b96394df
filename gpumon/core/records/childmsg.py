"""The lines gpumon's own helper children print, decoded at the boundary like any other outside JSON.

doctor's torch check and calibrate's slice probes run under the Python the user names (``--python``,
``$GPUMON_PYTHON``): whatever that interpreter runs, the line it prints is outside data. Each line goes through
``decode.loads`` (size cap, depth limit, finite numbers) and then the checks of its own fields, so a bad one is
a ``Refused`` with the reason, never a RecursionError, a KeyError or a NaN reaching a fit.
"""

from __future__ import annotations

from typing import Any

from gpumon.core.records.decode import Refused, integer, loads, number

MAX_LINE = 1 << 20  # one answer's bytes: a probe's kernel end times are a few thousand numbers
MAX_TEXT = 1000  # characters kept of a version, a device name or an error
MAX_ENDS = 1_000_000  # kernel end times in one probe answer
MAX_DEVICES = 4096
MAX_SECONDS = 1e6  # a probe's busy and wall seconds within one calibration
MAX_CLOCK_S = (
    1e9  # a kernel's end on the probe's clock (perf_counter: seconds since boot, about 30 years)
)

TORCH_TEXT = ("torch", "cuda_build", "device_name", "cuda_error", "error")


def _object(line: str | bytes) -> dict[str, Any]:
    data = loads(line, max_bytes=MAX_LINE)
    if not isinstance(data, dict):
        raise Refused("not a JSON object")
    return data


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Refused(f"{key} is not text")
    return value[:MAX_TEXT]


def torch_report(line: str | bytes) -> dict[str, Any]:
    """doctor's torch check (``checks/doctor.py`` ``TORCH_PROBE``): ``error``, or ``torch`` with ``cuda_build``,
    ``cuda_available``, ``device_count`` (0 unless CUDA is available), ``device_name``, ``cuda_error``."""
    data = _object(line)
    out: dict[str, Any] = {k: v for k in TORCH_TEXT if (v := _text(data, k)) is not None}
    if "error" in out:
        return {"error": out["error"]}
    if "torch" not in out:
        raise Refused("neither a torch version nor an error")
    available = data.get("cuda_available", False)
    if not isinstance(available, bool):
        raise Refused("cuda_available is not true or false")
    out["cuda_available"] = available
    count = data.get("device_count", 0)
    out["device_count"] = integer(count, "device_count", 0, MAX_DEVICES) if available else 0
    return out


def probe_answer(line: str | bytes) -> dict[str, Any]:
    """One answer of a calibrate slice probe (``workloads/sliceprobe.py``): ``ready`` with ``kernel_s``, ``error``,
    ``ends`` (kernel end times), or ``busy_s`` and ``wall_s``; the fields it holds checked, others dropped."""
    data = _object(line)
    out: dict[str, Any] = {}
    error = _text(data, "error")
    if error:
        out["error"] = error
    if "ready" in data:
        if not isinstance(data["ready"], bool):
            raise Refused("ready is not true or false")
        out["ready"] = data["ready"]
        if data["ready"]:
            out["kernel_s"] = number(data.get("kernel_s"), "kernel_s", 1e-9, 10.0)
    if "ends" in data:
        ends = data["ends"]
        if not isinstance(ends, list) or len(ends) > MAX_ENDS:
            raise Refused(f"ends is not a list of at most {MAX_ENDS} times")
        out["ends"] = [number(t, "a kernel end", -MAX_CLOCK_S, MAX_CLOCK_S) for t in ends]
    for key in ("busy_s", "wall_s"):
        if key in data:
            out[key] = number(data[key], key, 0.0, MAX_SECONDS)
    return out
