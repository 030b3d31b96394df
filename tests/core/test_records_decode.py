"""The decoding boundary's pieces on their own: the enums, bounded JSON, records from their fields, probe lines."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumon.core.records import probemsg
from gpumon.core.records.decode import Refused, loads, read_json
from gpumon.core.records.enums import JobState, PcieMethod, RunStatus, ShareKind
from gpumon.core.records.machine import GpuInfo, HostInfo


def test_an_enum_member_is_its_word_everywhere():
    assert RunStatus.COMPLETE == "complete" and f"{JobState.NOT_STARTED}" == "not started"
    assert str(ShareKind.MPS) == "mps" and repr(RunStatus.FAILED) == "'failed'"
    assert json.dumps({"s": PcieMethod.GPM}) == '{"s": "gpm"}'
    with pytest.raises(ValueError):
        RunStatus("done")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 10_000 + "]" * 10_000, "nested deeper than 4 levels"),
        ("[[[[[1]]]]]", "nested deeper than 4 levels"),
        ('{"r": 1e400}', "number 1e400 is out of range"),
        ('{"r": NaN}', "NaN is not a number gpumon records"),
        ('{"r": -Infinity}', "-Infinity is not a number gpumon records"),
        ('{"r": ' + "9" * 309 + "}", "integer of 309 digits is out of range"),
        ("x" * 101, "larger than 100 bytes"),
        ("{", "not valid JSON"),
    ],
)
def test_outside_json_is_refused_with_a_reason_never_an_exception_of_python(text, reason):
    with pytest.raises(Refused) as refused:
        loads(text, max_bytes=100 if text.startswith("x") else 1 << 20, max_depth=4)
    assert str(refused.value) == reason


def test_a_record_is_written_and_read_from_its_fields():
    gpu = GpuInfo(name="H100", pcie_gen=5, pcie_method=PcieMethod.COUNTERS, gpm_metrics=("a",))
    assert GpuInfo.from_json(json.loads(json.dumps(gpu.to_json()))) == gpu
    host = HostInfo(hostname="box", cpus=16, cpu_affinity=(0, 1))
    assert HostInfo.from_json(host.to_json()) == host
    with pytest.raises(Refused, match=r"host.cpus is 1000000000, not within \[0, 1048576\]"):
        HostInfo.from_json({"cpus": 10**9})


def test_nvml_device_info_out_of_bounds_is_left_unknown_not_an_error():
    info = {"name": "X", "pcie_gen": 999, "pcie_method": "counters", "unknown_key": 1}
    assert GpuInfo.of_device(info) == GpuInfo(name="X", pcie_method=PcieMethod.COUNTERS)


def _line(**fields) -> bytes:
    return json.dumps({"v": 1, "pid": 7, **fields}, allow_nan=True).encode()


def test_a_probe_batch_keeps_its_good_rows_and_counts_the_bad():
    good = [3, 10, 1000, 8, 0, 0, None]
    bad = [[4, 10, 1000, float("nan"), 0, 0, None], [5, 1e400, 1, 1, 0, 0, None], [6, 1, 1], "x"]
    message = probemsg.decode(_line(type="steps", rows=[good, *bad], dropped=2))
    assert isinstance(message, probemsg.Steps)
    assert [r.step for r in message.rows] == [3] and message.bad_rows == 4 and message.dropped == 2
    assert math.isnan(message.rows[0].copy_ns)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"v":[1],"type":"steps"}', "probe protocol v[1] is not v1"),
        (b'{"v":1,"pid":1e400,"type":"steps"}', "pid inf is not a process id"),
        (
            b'{"v":1,"type":"meta","info":{"lr":NaN}}',
            "a meta message holds a number that is not finite",
        ),
        (b'{"v":1,"type":"meta","info":[]}', "a meta message without an info object"),
        (b'{"v":1,"type":"steps","rows":{}}', "a steps message without a list of rows"),
        (b'{"v":1,"type":"gossip"}', "unknown message type 'gossip'"),
        (b"[1]", "not a JSON object"),
    ],
)
def test_a_probe_line_that_is_not_a_message_is_refused_with_why(line, reason):
    with pytest.raises(Refused) as refused:
        probemsg.decode(line)
    assert str(refused.value) == reason


NUMBER = st.builds(
    lambda sign, digits, fraction, exponent: f"{sign}{digits}{fraction}{exponent}",
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "1", "9" * 308, "1" + "0" * 308, "17"]),
    st.sampled_from(["", ".5", ".000001"]),
    st.sampled_from(["", "e5", "E-7", "e308", "e309", "E+400", "e-400"]),
)


@settings(max_examples=300, deadline=None)
@given(numbers=st.lists(NUMBER, min_size=1, max_size=4), text=st.text(max_size=8))
def test_a_float_beyond_the_double_range_is_refused_however_it_is_written(numbers, text):
    data = "[" + ", ".join([*numbers, json.dumps(text)]) + "]"
    beyond = [n for n in numbers if math.isinf(float(n))]
    for form in (data, data.encode()):
        if beyond:
            with pytest.raises(Refused, match="is out of range"):
                loads(form, max_bytes=1 << 20, walk=False)
        else:
            assert loads(form, max_bytes=1 << 20, walk=False) == json.loads(data)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.integers(min_value=0, max_value=3 * (1 << 16)),
    cap=st.sampled_from([10, 1 << 16, 1 << 17]),
)
def test_a_json_file_is_read_whole_up_to_its_cap_and_refused_beyond(tmp_path, size, cap):
    path = tmp_path / "f.json"
    path.write_bytes(b"[" + b" " * max(size - 2, 0) + b"]")
    if path.stat().st_size > cap:
        with pytest.raises(Refused, match=f"larger than {cap} bytes"):
            read_json(path, max_bytes=cap)
    else:
        assert read_json(path, max_bytes=cap) == []


def test_a_json_file_is_never_read_through_a_link_nor_from_a_folder_or_a_fifo(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(OSError):
        read_json(tmp_path / "link.json", max_bytes=100)
    with pytest.raises(OSError):
        read_json(tmp_path, max_bytes=100)
    with pytest.raises(OSError, match="not a plain file"):  # refused before a read: never a wait
        read_json(tmp_path / "fifo.json", max_bytes=100)
