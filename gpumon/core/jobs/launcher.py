"""Starts and stops the co-resident workloads (slots A and B), each tied to the monitor's life."""

from __future__ import annotations

import functools
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpumon.core.jobs.beside import BesideTarget
from gpumon.core.records.bus import Bus
from gpumon.core.records.clock import RunClock
from gpumon.core.jobs.interpreter import child_path, command_argv
from gpumon.core.jobs.lifeline import die_with_parent, wait_or_kill
from gpumon.core.probing.listener import Listener
from gpumon.core.records.model import LogLine, WorkloadState
from gpumon.core.records.slots import SLOTS, Slot, is_slot
from gpumon.core.probing.probe import ENV_FD, ENV_SLOT, ENV_WARMUP
from gpumon.errors import EnvironmentFailure, UsageError

TAIL_LINES = 20
OUTPUT_EOF_WAIT_S = 2.0
ATTACHED_POLL_S = 0.5
AUTOPROBE_DIR = Path(__file__).parents[1] / "probing" / "autoprobe"


def probe_pythonpath(gpumon_path: str, existing: str, autoprobe: bool) -> str:
    """PYTHONPATH for a job's interpreter: the auto-probe first (``autoprobe``), then gpumon's package alone
    (not the directory it is installed in, so none of the monitor's other packages), then ``existing``."""
    paths = [str(AUTOPROBE_DIR)] if autoprobe else []
    paths += [gpumon_path, existing]
    return os.pathsep.join(p for p in paths if p)


def find_program(name: str) -> str:
    """The program a command line starts (``shutil.which``: a path, or a name on PATH), else UsageError saying why:
    not found, a directory, or a file that is not executable."""
    found = shutil.which(name)
    if found is not None:
        return found
    if os.sep in name and os.path.isdir(name):
        raise UsageError(f"cannot run {name}: it is a directory")
    if os.sep in name and os.path.exists(name):
        raise UsageError(
            f"cannot run {name}: it is not executable (chmod +x it, or run it with its interpreter)"
        )
    raise UsageError(f"command not found: {name}")


def exit_text(status: int) -> str:
    """How a process ended, in words: "exited with status 3" or "was killed by SIGKILL"."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"


@dataclass(frozen=True)
class LaunchRequest:
    """What to start in a slot: a built-in workload or a user command."""

    spec: str
    kind: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    beside: BesideTarget | None = None  # kind "beside": a running process to watch, not to start

    @classmethod
    def attach(cls, target: BesideTarget) -> "LaunchRequest":
        """A process that is already running (``--beside PID``): watched, never started or signalled."""
        return cls(spec=target.spec, kind="beside", argv=target.argv, beside=target)

    @classmethod
    def command(cls, text: str, python: str | None = None) -> "LaunchRequest":
        """A user command line, run without a shell, with the auto-probe installed; a bare ``python`` in it is the
        workloads' Python (``python``: ``--python``, else ``$GPUMON_PYTHON``; ``interpreter.command_argv``)."""
        try:
            argv = tuple(shlex.split(text))
        except ValueError as exc:
            raise UsageError(f"cannot parse command {text!r}: {exc}") from None
        if not argv:
            raise UsageError("empty --cmd")
        argv = command_argv(argv, python)
        find_program(argv[0])
        return cls(spec=f"cmd:{text}", kind="cmd", argv=argv)


@dataclass
class Workload:
    """A workload in one slot: a child gpumon owns (``owned``, its ``popen`` once started), or an attached process.

    The launcher changes it only under its lock; everyone else reads copies taken under that lock
    (``Launcher.snapshot``, ``Launcher.get``), so the fields a reader sees belong together.
    """

    slot: Slot
    request: LaunchRequest
    pid: int  # 0 while the slot is reserved and the child not forked yet
    start_t: float
    owned: bool  # gpumon started it (and stops it); an attached process is never signalled
    popen: subprocess.Popen | None = None
    stop_t: float | None = None
    exit_status: int | None = None
    start_error: str | None = None  # why it could not be started (Popen failed): it never ran
    stop_requested: bool = False
    ended: bool = False
    probe: socket.socket | None = None  # an attached process's rendezvous connection
    detach: threading.Event = field(default_factory=threading.Event)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))

    @property
    def running(self) -> bool:
        return not self.ended

    @property
    def failed(self) -> bool:
        """It could not be started, or it ended on its own with a non-zero status (gpumon did not stop it)."""
        return self.start_error is not None or (
            not self.stop_requested and self.exit_status not in (0, None)
        )

    def ending(self) -> str:
        """How it ended, in words: "could not start: ...", "exited with status 3", "was killed by SIGKILL"."""
        if self.start_error is not None:
            return f"could not start: {self.start_error}"
        return exit_text(self.exit_status or 0)


class Launcher:
    """Owns the child processes: own process group each, probe pipe, output pipe, reaper thread.

    Call ``start`` from a long-lived thread (the main thread): Linux delivers
    PDEATHSIG when the *thread* that forked the child exits. The workloads are kept under ``_lock``:
    a slot is reserved there before its child is forked, the reapers and watchers end workloads there,
    and readers get copies (``snapshot``, ``get``).
    """

    def __init__(
        self, bus: Bus, clock: RunClock, listener: Listener, warmup: int | None = None
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.listener = listener
        self.warmup = warmup
        self._workloads: dict[Slot, Workload] = {}
        self._lock = threading.Lock()
        self._reapers: list[threading.Thread] = []
        bus.subscribe(self._on_event, LogLine)

    def _on_event(self, item: object) -> None:
        if isinstance(item, LogLine) and is_slot(item.slot):
            with self._lock:
                workload = self._workloads.get(item.slot)
                if workload is not None:
                    workload.tail.append(item.text)

    def snapshot(self) -> dict[Slot, Workload]:
        """Every slot's workload as it is now, by slot (copies: later changes do not show in them)."""
        with self._lock:
            return {
                slot: replace(w, tail=deque(w.tail, maxlen=TAIL_LINES))
                for slot, w in sorted(self._workloads.items())
            }

    def get(self, slot: Slot) -> Workload | None:
        """A copy of ``slot``'s workload as it is now (None: the slot was never used)."""
        with self._lock:
            workload = self._workloads.get(slot)
            return (
                replace(workload, tail=deque(workload.tail, maxlen=TAIL_LINES))
                if workload is not None
                else None
            )

    def failed(self) -> list[Workload]:
        """Workloads that could not start or ended on their own with a non-zero status, by slot."""
        return [w for w in self.snapshot().values() if w.failed]

    def pids(self) -> dict[Slot, int]:
        """PIDs of the running workloads by slot (a slot reserved for a child not forked yet has none)."""
        with self._lock:
            return {p: w.pid for p, w in self._workloads.items() if w.running and w.pid}

    def _reserve(self, workload: Workload) -> None:
        """Claim the workload's slot, or UsageError if something still runs there."""
        if workload.slot not in SLOTS:
            raise UsageError(f"unknown slot {workload.slot!r} (choose from A, B)")
        with self._lock:
            current = self._workloads.get(workload.slot)
            if current is not None and current.running:
                raise UsageError(f"slot {workload.slot} is busy")
            self._workloads[workload.slot] = workload

    def start(
        self,
        *,
        slot: Slot,
        request: LaunchRequest,
        default_threads: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Workload:
        """Start ``request`` in ``slot``; ``extra_env`` is added to the child's environment.

        The slot is reserved before the child is forked, so a ``stop_all`` meanwhile stops this child too; a child
        that cannot be forked stays in its slot as failed (``start_error``) and raises EnvironmentFailure.
        """
        workload = Workload(slot, request, 0, self.clock.now(), owned=True)
        self._reserve(workload)
        gpumon_path = child_path()  # first: it may fail, and no pipe is open yet
        (probe_r, probe_w), (out_r, out_w) = os.pipe(), os.pipe()
        env = self._child_env(slot, request, probe_w, default_threads, gpumon_path)
        env.update(extra_env or {})
        self.bus.publish(WorkloadState(slot, "starting", self.clock.now()))
        # before it exists: its steps end after these, and a sample read during Popen is not the other's "alone"
        launched_ns, launched_t = time.monotonic_ns(), self.clock.now()
        try:
            popen = subprocess.Popen(
                request.argv,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(probe_w,),
                start_new_session=True,
                preexec_fn=functools.partial(die_with_parent, os.getpid()),
            )
        except OSError as exc:
            for fd in (probe_r, probe_w, out_r, out_w):
                os.close(fd)
            raise self._not_forked(workload, exc) from None
        os.close(probe_w)
        os.close(out_w)
        with self._lock:
            workload.popen, workload.pid, workload.start_t = popen, popen.pid, launched_t
            stopped_meanwhile = workload.stop_requested
        self.listener.watch(probe_r, slot, "probe", since_ns=launched_ns)
        output_closed = self.listener.watch(out_r, slot, "output")
        job = {"spec": request.spec, "kind": request.kind, "argv": list(request.argv)}
        self.bus.publish(WorkloadState(slot, "running", workload.start_t, pid=popen.pid, job=job))
        reaper = threading.Thread(
            target=self._reap,
            args=(workload, output_closed),
            name=f"gpumon-reap-{slot}",
            daemon=True,
        )
        reaper.start()
        with self._lock:
            self._reapers.append(reaper)
        if (
            stopped_meanwhile
        ):  # stop_all came while the child was being forked: it stops like the others
            self._terminate(workload)
        return self.get(slot) or workload

    def _not_forked(self, workload: Workload, exc: OSError) -> EnvironmentFailure:
        """A child that could not be forked stays in its slot as failed (``start_error``); the error to raise."""
        error = f"cannot start {workload.request.argv[0]}: {exc.strerror or exc}"
        with self._lock:
            workload.start_error, workload.stop_t, workload.ended = error, self.clock.now(), True
        self.bus.publish(WorkloadState(workload.slot, "failed", workload.stop_t, tail=str(exc)))
        return EnvironmentFailure(error)

    def attach(
        self, *, slot: Slot, request: LaunchRequest, probe: socket.socket | None
    ) -> Workload:
        """Watch the running process of ``request`` in ``slot``: its tree is sampled like a child's and
        its probe connection (None: no rendezvous) read like a child's pipe. It is never signalled."""
        target = request.beside
        if target is None:
            raise ValueError("attach needs a --beside request")
        workload = Workload(slot, request, target.pid, self.clock.now(), owned=False, probe=probe)
        self._reserve(workload)
        if probe is not None:
            self.listener.watch(os.dup(probe.fileno()), slot, "probe")
        self.bus.publish(
            WorkloadState(
                slot,
                "running",
                workload.start_t,
                pid=target.pid,
                attached=target.to_json(probe is not None),
            )
        )
        watcher = threading.Thread(
            target=self._watch_attached, args=(workload,), name=f"gpumon-watch-{slot}", daemon=True
        )
        watcher.start()
        with self._lock:
            self._reapers.append(watcher)
        return self.get(slot) or workload

    def _watch_attached(self, workload: Workload) -> None:
        """Until the attached process ends (a pidfd when the kernel has them, else /proc) or gpumon detaches."""
        target = workload.request.beside
        assert target is not None
        try:
            pidfd: int | None = os.pidfd_open(workload.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            while not workload.detach.is_set() and target.alive():
                if pidfd is not None:
                    if select.select([pidfd], [], [], ATTACHED_POLL_S)[0]:
                        break
                else:
                    workload.detach.wait(ATTACHED_POLL_S)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        self._let_go(workload, "detached" if workload.detach.is_set() else "exited")

    def _let_go(self, workload: Workload, state: str) -> None:
        """Stop reading an attached process and say how it left: "exited" by itself, or "detached" (still running)."""
        with self._lock:
            if workload.ended:
                return
            workload.ended, workload.stop_t = True, self.clock.now()
        if workload.probe is not None:
            try:
                workload.probe.shutdown(
                    socket.SHUT_RDWR
                )  # the listener reads EOF and closes its copy
            except OSError:
                pass
            workload.probe.close()
        self.bus.publish(WorkloadState(workload.slot, state, workload.stop_t, pid=workload.pid))

    def _child_env(
        self,
        slot: Slot,
        request: LaunchRequest,
        probe_fd: int,
        default_threads: int | None,
        gpumon_path: str,
    ) -> dict[str, str]:
        env = dict(os.environ)
        env.update(request.env)
        env[ENV_FD] = str(probe_fd)
        env[ENV_SLOT] = slot
        env["PYTHONUNBUFFERED"] = "1"
        if self.warmup is not None:
            env[ENV_WARMUP] = str(self.warmup)
        if default_threads is not None:
            env["GPUMON_DEFAULT_THREADS"] = str(default_threads)
        env["PYTHONPATH"] = probe_pythonpath(
            gpumon_path, env.get("PYTHONPATH", ""), autoprobe=request.kind == "cmd"
        )
        return env

    def _reap(self, workload: Workload, output_closed: threading.Event) -> None:
        assert workload.popen is not None
        status = workload.popen.wait()
        stop_t = self.clock.now()
        self.listener.hurry()  # its last steps and the EOF are in the pipes now
        output_closed.wait(OUTPUT_EOF_WAIT_S)
        with self._lock:
            workload.stop_t, workload.exit_status, workload.ended = stop_t, status, True
            state = "stopped" if workload.stop_requested else "exited"
            tail = "\n".join(workload.tail)
        self.bus.publish(
            WorkloadState(
                workload.slot, state, stop_t, pid=workload.pid, exit_status=status, tail=tail
            )
        )

    def stop(self, slot: Slot, timeout: float = 5.0) -> None:
        """SIGTERM the workload's process group, SIGKILL it after ``timeout`` seconds; an attached process is
        only let go (never signalled)."""
        with self._lock:
            workload = self._workloads.get(slot)
            if workload is None or not workload.running:
                return
            workload.stop_requested = True
        if not workload.owned:
            self._detach(workload)
        else:
            self._terminate(workload, timeout)

    def _terminate(self, workload: Workload, timeout: float = 5.0) -> None:
        """SIGTERM to a child's group, SIGKILL after ``timeout``; a child not forked yet is stopped once it is."""
        self._signal_group(workload, signal.SIGTERM)
        self._kill_after(workload, timeout)

    def _kill_after(self, workload: Workload, timeout: float) -> None:
        """SIGKILL to a child's group unless it exits within ``timeout`` of its SIGTERM (one not forked yet: its
        start() stops it once it is)."""
        if workload.popen is not None:
            wait_or_kill(
                workload.popen, timeout, lambda: self._signal_group(workload, signal.SIGKILL)
            )

    def _detach(self, workload: Workload) -> None:
        workload.detach.set()
        self._let_go(workload, "detached")

    def stop_all(self, timeout: float = 5.0) -> None:
        """Stop every child gpumon started; let go of every attached process (never signalled)."""
        with self._lock:
            running = [w for w in self._workloads.values() if w.running]
            for workload in running:
                workload.stop_requested = True
        for workload in running:
            if not workload.owned:
                self._detach(workload)
        children = [w for w in running if w.owned]
        for workload in children:
            self._signal_group(workload, signal.SIGTERM)
        for workload in children:
            self._kill_after(workload, timeout)
        self.join_reapers()

    def join_reapers(self, timeout: float = OUTPUT_EOF_WAIT_S + 1.0) -> None:
        """Wait until every exited workload has published its final state."""
        with self._lock:
            reapers = list(self._reapers)
        for reaper in reapers:
            reaper.join(timeout)

    @staticmethod
    def _signal_group(workload: Workload, signum: int) -> None:
        # a process gpumon did not start is never signalled; a reserved slot has no child (pid 0 is our own group)
        if not workload.owned or workload.pid <= 0:
            return
        try:
            os.killpg(workload.pid, signum)
        except ProcessLookupError:
            pass
