"""A time-sliced device for the calibration probes: the test suite's stand-in for a GPU's scheduler.

    python -m tests.fakegpu.server SOCKET --slice-ms 30 --switch-ms 3 [--mps-fill 0.6]

Clients (gpumon.workloads.sliceprobe's ``sliced:SOCKET`` device) queue kernels of a given length; one scheduler
thread runs them in real time, one context at a time, as a GPU's time slicing does:

- the context that holds the device runs its kernels; when the other context has work queued and the holder has
  had the device for a whole slice, the device switches (``--switch-ms`` with neither running) and the other holds
  it for its slice;
- a context that runs out of work gives the device up at once, and the other takes it without a switch cost;
- two clients that said ``hello mps`` run at once instead, each at 1 / (1 + fill) of its speed while both have work.

It runs in slices of wall-clock time (``time.sleep``), so a loaded machine stretches them as it would any process;
kernel ends are stamped from the clock as they fall inside each stretch. What a switch took on the device's own
clock (from the end of the holder's last stretch to the start of the other's first: the scripted cost, plus what a
loaded machine adds to it) is kept, the witness a test compares a measured switch cost with. Protocol (one line
each way): ``hello ts|mps`` -> ``ok``; ``spin N D`` -> the N end times once all have run; ``run D`` -> ``START END``;
``switches`` -> every switch so far, in seconds; ``slices`` -> every slice a context held while the other waited (its
scripted length plus how late a loaded machine woke the scheduler), in seconds. Prints ``ready`` once it listens; exits when stdin closes (its
owner, the test, is gone).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field

CHUNK_S = 5e-3  # the scheduler looks again at least this often


@dataclass(eq=False)
class Client:
    mps: bool = False
    queue: deque = field(
        default_factory=deque
    )  # [remaining_s, started_at or None, done Event, record]

    def work(self) -> float:
        return sum(k[0] for k in self.queue)


class Device:
    def __init__(self, slice_s: float, switch_s: float, fill: float) -> None:
        self.slice_s, self.switch_s, self.fill = slice_s, switch_s, fill
        self.cv = threading.Condition()
        self.clients: list[Client] = []
        self.owner: Client | None = None
        self.since = 0.0
        self.mark = 0.0
        self.last: list[Client] = []
        self.switched_at: float | None = (
            None  # the end of the holder's last stretch, while a switch is under way
        )
        self.switches: list[
            float
        ] = []  # each switch's wall time, as the probes see it (see the module docstring)
        self.slices: list[
            float
        ] = []  # each slice held to its end while the other waited, on this clock

    def submit(self, client: Client, durations: list[float]) -> list[list]:
        kernels = [[d, None, threading.Event(), {}] for d in durations]
        with self.cv:
            client.queue.extend(kernels)
            self.cv.notify_all()
        return kernels

    def _advance(self, client: Client, start: float, seconds: float, rate: float) -> None:
        """``client`` ran from ``start`` for ``seconds`` of wall time at ``rate``: its kernels that ended are done."""
        t, budget = start, seconds * rate
        while client.queue and budget > 0:
            kernel = client.queue[0]
            if kernel[1] is None:
                kernel[1] = t
            used = min(kernel[0], budget)
            kernel[0] -= used
            budget -= used
            t += used / rate
            if kernel[0] <= 1e-12:
                client.queue.popleft()
                kernel[3]["start"], kernel[3]["end"] = kernel[1], t
                kernel[2].set()

    def run(self) -> None:
        while True:
            with self.cv:
                while not any(c.queue for c in self.clients):
                    self.last = []
                    self.cv.wait()
                busy = [c for c in self.clients if c.queue]
                now = time.monotonic()
                if len(busy) == 2 and all(c.mps for c in busy):
                    step = min(CHUNK_S, *(c.work() * (1 + self.fill) for c in busy))
                    running, rate, switch = busy, 1 / (1 + self.fill), 0.0
                else:
                    switch = 0.0
                    if (
                        self.owner not in busy
                    ):  # the holder ran out of work: the other takes the device at once
                        self.owner, self.since = busy[0], now
                    elif (
                        len(busy) == 2 and now - self.since >= self.slice_s
                    ):  # its slice is over and the other waits
                        self.slices.append(now - self.since)
                        self.owner = next(c for c in busy if c is not self.owner)
                        switch = self.switch_s
                    left = (
                        self.since + self.slice_s - now
                        if len(busy) == 2 and not switch
                        else CHUNK_S
                    )
                    step = max(1e-4, min(CHUNK_S, self.owner.work(), left))
                    running, rate = [self.owner], 1.0
            if switch:
                self.switched_at = self.mark
                time.sleep(switch)
                with self.cv:
                    self.since = self.mark = time.monotonic()
                    self.last = []
                continue
            # the device runs from the end of what was last accounted when the same contexts go on running (the
            # fake's own time between two stretches is the device's, not an idle gap), else from now
            began = self.mark if running == self.last else time.monotonic()
            if self.switched_at is not None:
                self.switches.append(began - self.switched_at)
                self.switched_at = None
            time.sleep(step)
            with self.cv:
                self.mark = time.monotonic()
                self.last = running
                for client in running:
                    self._advance(client, began, self.mark - began, rate)


def handle(device: Device, conn: socket.socket) -> None:
    client = Client()
    with device.cv:
        device.clients.append(client)
    try:
        stream = conn.makefile("rw", encoding="utf-8")
        for line in stream:
            words = line.split()
            if words[0] == "hello":
                client.mps = words[1] == "mps"
                answer = "ok"
            elif words[0] == "spin":
                kernels = device.submit(client, [float(words[2])] * int(words[1]))
                for k in kernels:
                    k[2].wait()
                answer = " ".join(f"{k[3]['end']:.7f}" for k in kernels)
            elif words[0] in ("switches", "slices"):
                with device.cv:
                    answer = " ".join(f"{s:.7f}" for s in getattr(device, words[0]))
            elif words[0] == "run":
                (kernel,) = device.submit(client, [float(words[1])])
                kernel[2].wait()
                answer = f"{kernel[3]['start']:.7f} {kernel[3]['end']:.7f}"
            else:
                answer = "error"
            stream.write(answer + "\n")
            stream.flush()
    finally:
        with device.cv:
            device.clients.remove(client)
            if device.owner is client:
                device.owner = None
        conn.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("socket")
    parser.add_argument("--slice-ms", type=float, default=30.0)
    parser.add_argument("--switch-ms", type=float, default=3.0)
    parser.add_argument("--mps-fill", type=float, default=0.6)
    args = parser.parse_args(argv)
    device = Device(args.slice_ms / 1e3, args.switch_ms / 1e3, args.mps_fill)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    listener.bind(args.socket)
    listener.listen(8)
    threading.Thread(target=device.run, daemon=True).start()

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=handle, args=(device, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()  # until the owner closes our stdin (or dies)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
