"""The parent side of the probe: pipes in, events on the bus, bad input turned into notices."""

from __future__ import annotations

import json
import os
import queue

import pytest

from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.probing.listener import Listener
from gpumon.core.records.model import (
    THREAD_DIED,
    LogLine,
    Notice,
    StepBatch,
    StepEvent,
    WorkloadMeta,
)
from tests.helpers import unbatched, wait_for


def start(**kw) -> tuple[Listener, "queue.SimpleQueue[object]", RunClock]:
    bus, clock = Bus(), RunClock.start()
    events: queue.SimpleQueue[object] = queue.SimpleQueue()
    bus.subscribe(events.put)
    listener = Listener(bus, clock, **kw)
    listener.start()
    return listener, events, clock


def drain(events: "queue.SimpleQueue[object]") -> list[object]:
    """What was published, each StepBatch as its steps."""
    items = []
    while not events.empty():
        items.append(events.get())
    return unbatched(items)


def test_steps_meta_and_output_become_events():
    listener, events, clock = start()
    probe_r, probe_w = os.pipe()
    out_r, out_w = os.pipe()
    probe_closed = listener.watch(probe_r, "B", "probe")
    out_closed = listener.watch(out_r, "B", "output")
    t_ns = clock.t0_ns + 1_500_000_000
    messages = [
        {"v": 1, "pid": 7, "type": "hello", "process": "B"},
        {"v": 1, "pid": 7, "type": "meta", "info": {"model": "fcn"}},
        {
            "v": 1,
            "pid": 7,
            "type": "steps",
            "rows": [
                [0, t_ns, 250_000_000, 8, 1, 1024, 1_000_000],
                [1, t_ns + 10, 10, None, 0, 0, None],
            ],
            "dropped": 3,
        },
        {"v": 2, "pid": 7, "type": "steps", "rows": [[9, 0, 0, 0, 0, 0, 0]]},
    ]
    payload = "".join(json.dumps(m) + "\n" for m in messages).encode() + b"not json\n"
    os.write(probe_w, payload[:37])
    os.write(probe_w, payload[37:])
    os.write(out_w, b"epoch 1\r\nloss 0.5\npartial")
    os.close(probe_w)
    os.close(out_w)
    assert probe_closed.wait(5) and out_closed.wait(5)
    listener.stop()
    listener.join(5)
    published = []
    while not events.empty():
        published.append(events.get())
    batches = [i for i in published if isinstance(i, StepBatch)]
    assert [(b.slot, [s.step for s in b.steps]) for b in batches] == [("B", [0, 1])], (
        "one message's steps are one publish"
    )
    items = unbatched(published)

    steps = [i for i in items if isinstance(i, StepEvent)]
    assert [s.step for s in steps] == [0, 1]
    first = steps[0]
    assert (first.slot, first.pid, first.t, first.iter_s, first.samples, first.warmup) == (
        "B",
        7,
        1.5,
        0.25,
        8.0,
        True,
    )
    assert (
        first.copy_bytes == 1024 and first.copy_s == 0.001 and first.copy_bandwidth == 1024 / 0.001
    )
    assert steps[1].samples != steps[1].samples and steps[1].copy_s != steps[1].copy_s
    assert [m.info for m in items if isinstance(m, WorkloadMeta)] == [{"model": "fcn"}]
    assert [line.text for line in items if isinstance(line, LogLine)] == [
        "epoch 1",
        "loss 0.5",
        "partial",
    ]
    notices = [n.text for n in items if isinstance(n, Notice)]
    assert any("dropped 3 steps" in n for n in notices)
    assert any("v2" in n for n in notices)
    assert any("malformed" in n for n in notices)


def test_a_failing_subscriber_does_not_stop_the_others():
    bus = Bus()
    seen = []

    def broken(item: object) -> None:
        raise RuntimeError("boom")

    bus.subscribe(broken)
    unsubscribe = bus.subscribe(seen.append)
    bus.publish(1)
    unsubscribe()
    bus.publish(2)
    assert seen == [1]


def test_a_subscriber_gets_only_the_types_it_names():
    bus = Bus()
    steps, notices, everything = [], [], []
    bus.subscribe(steps.append, StepBatch)
    bus.subscribe(everything.append)
    step, notice = StepBatch.of(StepEvent("A", 1, 0, 0.0, 0.1)), Notice(0.0, "hello")
    bus.publish(step)
    bus.publish(notice)
    assert steps == [step] and everything == [step, notice]
    unsubscribe = bus.subscribe(notices.append, Notice)  # after the routes were worked out
    bus.publish(notice)
    unsubscribe()
    bus.publish(notice)
    assert notices == [notice] and steps == [step] and everything == [step, notice, notice, notice]


def test_batches_from_every_child_are_gathered_into_one_wake_up_per_period():
    """Two probes flushing every 5 ms on their own phases wake the listener at most every GATHER_S."""
    import threading
    import time

    from gpumon.core.probing.listener import GATHER_S

    listener, events, clock = start()
    pipes = [os.pipe() for _ in range(2)]
    closed = [listener.watch(r, name, "probe") for (r, _), name in zip(pipes, "AB")]
    seconds, period = 1.0, 0.005
    batches = int(seconds / period)

    def probe(fd: int, phase: float) -> None:
        time.sleep(phase)
        for step in range(batches):
            row = [step, time.monotonic_ns(), 1_000_000, None, 0, 0, None]
            os.write(
                fd,
                (json.dumps({"v": 1, "pid": fd, "type": "steps", "rows": [row]}) + "\n").encode(),
            )
            time.sleep(period)
        os.close(fd)

    writers = [
        threading.Thread(target=probe, args=(w, i * period / 2)) for i, (_, w) in enumerate(pipes)
    ]
    began = time.monotonic()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert all(c.wait(10) for c in closed)
    elapsed = time.monotonic() - began
    listener.stop()
    listener.join(5)

    steps = [i for i in drain(events) if isinstance(i, StepEvent)]
    assert len(steps) == 2 * batches  # nothing lost by waiting
    # one wake-up per period, plus the one that registers the pipes and the ones that see them close
    assert listener.wakeups <= elapsed / GATHER_S + 4, (listener.wakeups, elapsed)


def _write_steps(fd: int, batches: int, rows: int, every_s: float, phase_s: float = 0.0) -> None:
    """A probe: ``batches`` lines of ``rows`` steps each, one every ``every_s``; then EOF."""
    import time

    lines = [
        (
            json.dumps(
                {
                    "v": 1,
                    "pid": fd,
                    "type": "steps",
                    "rows": [[b * rows + i, 0, 1_000_000, None, 0, 0, None] for i in range(rows)],
                }
            )
            + "\n"
        ).encode()
        for b in range(batches)
    ]
    time.sleep(phase_s)
    for line in lines:
        os.write(fd, line)
        time.sleep(every_s)
    os.close(fd)


def _gather(
    period_s: float, batches: int, rows: int, every_s: float
) -> tuple[Listener, list[StepEvent], float]:
    """Two probes writing into a listener of ``period_s``: (listener, steps received, seconds it took)."""
    import threading
    import time

    listener, events, _ = start(period_s=period_s)
    pipes = [os.pipe() for _ in range(2)]
    closed = [listener.watch(r, name, "probe") for (r, _), name in zip(pipes, "AB")]
    writers = [
        threading.Thread(target=_write_steps, args=(w, batches, rows, every_s, i * every_s / 2))
        for i, (_, w) in enumerate(pipes)
    ]
    began = time.monotonic()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    listener.hurry()  # what the launcher does when a child exits: read its last steps and EOF now
    assert all(c.wait(10) for c in closed)
    elapsed = time.monotonic() - began
    listener.stop()
    listener.join(5)
    return listener, [i for i in drain(events) if isinstance(i, StepEvent)], elapsed


def test_the_period_is_the_front_ends_and_a_longer_one_loses_nothing():
    """A runner nobody watches reads every 0.5 s here (headless: every second): fewer wake-ups, every step."""
    listener, steps, elapsed = _gather(period_s=0.5, batches=300, rows=1, every_s=0.005)
    assert len(steps) == 2 * 300
    for process in "AB":
        assert [s.step for s in steps if s.slot == process] == list(range(300))
    # one wake-up per period, plus those that register the pipes, hurry and stop
    assert listener.wakeups <= elapsed / 0.5 + 5, (listener.wakeups, elapsed)


def test_a_stream_that_would_fill_its_pipe_within_the_period_is_read_sooner(monkeypatch):
    """Pipes of Linux's default 64 KiB (a kernel that refuses more) fed ~0.8 MB/s each: read every GATHER_S, not every 2 s."""
    import gpumon.core.probing.listener as listener_module

    monkeypatch.setattr(listener_module, "PIPE_BYTES", listener_module.DEFAULT_PIPE_BYTES)
    listener, steps, elapsed = _gather(period_s=2.0, batches=300, rows=100, every_s=0.005)
    assert len(steps) == 2 * 300 * 100, "every step arrives"
    assert listener.wakeups >= 2 * (elapsed / 2.0 + 5), (listener.wakeups, elapsed)


def test_a_burst_of_output_fits_the_pipe_the_listener_asked_for():
    """Each pipe is raised to PIPE_BYTES: half a MiB printed at once does not wait for the next read."""
    import fcntl

    from gpumon.core.probing.listener import PIPE_BYTES

    listener, events, _ = start(period_s=60.0)
    out_r, out_w = os.pipe()
    listener.watch(out_r, "A", "output")
    wait_for(
        lambda: fcntl.fcntl(out_w, fcntl.F_GETPIPE_SZ) == PIPE_BYTES,
        what="the pipe raised to PIPE_BYTES",
    )
    os.set_blocking(out_w, False)
    burst = b"x" * 1023 + b"\n"
    assert os.write(out_w, burst * 512) == 512 * 1024, "written at once, never blocked"
    os.close(out_w)
    listener.hurry()
    lines = [events.get(timeout=10) for _ in range(512)]
    assert all(isinstance(line, LogLine) and line.text == "x" * 1023 for line in lines)
    listener.stop()
    listener.join(5)


def _one_step(fd: int, step: int) -> None:
    """Write one probe message of one step, ``step``, on ``fd``."""
    row = [step, 0, 1, None, 0, 0, None]
    os.write(fd, (json.dumps({"v": 1, "pid": 7, "type": "steps", "rows": [row]}) + "\n").encode())


def test_hurry_reads_at_once_instead_of_at_the_end_of_the_period():
    listener, events, _ = start(period_s=60.0)
    probe_r, probe_w = os.pipe()
    listener.watch(probe_r, "A", "probe")
    _one_step(probe_w, 0)
    listener.hurry()
    item = events.get(timeout=10)  # not 60 s
    assert isinstance(item, StepBatch) and [s.step for s in item.steps] == [0]
    listener.stop()
    listener.join(5)


def test_read_now_publishes_what_was_written_before_it_returns_and_adds_no_read_of_its_own():
    """The monitor's refresh thread calls it before each frame: the frame shows every step flushed, and the listener
    wakes once a frame instead of on its own cadence too."""
    listener, events, _ = start(period_s=60.0)
    probe_r, probe_w = os.pipe()
    listener.watch(probe_r, "A", "probe")
    _one_step(probe_w, 0)
    assert isinstance(
        events.get(timeout=10), StepBatch
    )  # the first read: from now on it naps its 60 s period
    _one_step(probe_w, 1)
    assert listener.read_now(10)
    assert [e.step for e in drain(events) if isinstance(e, StepEvent)] == [1], (
        "published before it returned"
    )
    _one_step(probe_w, 2)
    with pytest.raises(queue.Empty):  # no second read after read_now's: the period's nap goes on
        events.get(timeout=0.3)
    woken = listener.wakeups
    assert listener.read_now(10)
    assert [e.step for e in drain(events) if isinstance(e, StepEvent)] == [2]
    assert listener.wakeups == woken + 1
    listener.stop()
    listener.join(5)
    assert not listener.read_now(0.1), "nobody reads once stopped"


def test_on_gathered_follows_each_read_that_published_something():
    """A runner's session hangs the recorder's flush_soon here (tests/core/test_pipeline_recorder.py)."""
    import threading

    gathered = threading.Event()
    listener, events, _ = start(period_s=60.0, on_gathered=gathered.set)
    probe_r, probe_w = os.pipe()
    listener.watch(probe_r, "A", "probe")
    assert not gathered.wait(0.2), "nothing read yet"
    _one_step(probe_w, 0)
    listener.hurry()
    assert gathered.wait(10) and isinstance(events.get(timeout=10), StepBatch)
    listener.stop()
    listener.join(5)


def test_a_runners_session_writes_its_capture_after_each_read_and_a_screens_does_not():
    from gpumon.core.capture.session import Session, SessionConfig

    assert Session(SessionConfig(nvml=False, listen_s=1.0)).listener.on_gathered is not None
    assert Session(SessionConfig(nvml=False)).listener.on_gathered is None


def test_a_listener_that_dies_says_why_closes_its_pipes_and_never_leaves_a_writer_blocked():
    listener, events, _ = start()
    out_r, out_w = os.pipe()
    closed = listener.watch(out_r, "A", "output")
    os.write(out_w, b"first line\n")
    wait_for(lambda: any(isinstance(e, LogLine) for e in drain(events)), what="the first line")

    def broken_select(timeout=None):  # the thread's own machinery fails (not one message)
        raise RuntimeError("selector broke")

    listener._selector.select = broken_select
    listener.hurry()
    assert closed.wait(10), "the stream is closed: nobody waits for an EOF that would never be read"
    listener.join(10)
    assert listener.failure == "RuntimeError: selector broke"
    died = [e for e in drain(events) if isinstance(e, Notice) and e.kind == THREAD_DIED]
    assert len(died) == 1 and "selector broke" in died[0].text
    with pytest.raises(BrokenPipeError):  # the job's next write fails at once instead of blocking
        os.write(out_w, b"x" * 70_000)
    late_r, late_w = os.pipe()
    assert listener.watch(late_r, "B", "probe").is_set(), (
        "a stream watched afterwards is closed too"
    )
    os.close(late_w)
    os.close(out_w)


def test_one_bad_message_among_good_ones_costs_no_step_and_is_counted():
    listener, events, clock = start()
    r, w = os.pipe()
    closed = listener.watch(r, "A", "probe")
    t_ns = clock.t0_ns + 10
    good = [[i, t_ns + i, 1000, 8, 0, 0, None] for i in range(3)]
    lines = [
        {"v": 1, "pid": 5, "type": "steps", "rows": good[:1]},
        '{"v":[1],"pid":5,"type":"steps","rows":[]}',
        {"v": 1, "pid": 5, "type": "steps", "rows": [good[1], [9, 1e400, 1, 1, 0, 0, None]]},
        '{"v":1,"pid":5,"type":"meta","info":{"lr":NaN}}',
        {"v": 1, "pid": 5, "type": "steps", "rows": good[2:]},
    ]
    text = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in lines)
    os.write(w, text.encode())
    os.close(w)
    assert closed.wait(10)
    items = drain(events)
    assert [e.step for e in items if isinstance(e, StepEvent)] == [0, 1, 2]
    assert not [e for e in items if isinstance(e, WorkloadMeta)]
    assert listener.refused == {"A": 3}
    texts = [e.text for e in items if isinstance(e, Notice)]
    assert any("not finite" in t for t in texts) and any("v[1]" in t for t in texts)
    assert "ignored 3 malformed probe messages or step rows in all" in texts
    listener.stop()
    assert listener.failure is None
