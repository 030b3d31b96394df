"""Experiment cells fanned out on a Ray cluster (``gpumon experiment SPEC --ray [ADDRESS]``).

A cell measures interference, so two cells must never share a GPU or, on the CPU, a core. Each
worker is a Ray actor that owns one GPU (``num_gpus=1``: Ray sets its CUDA_VISIBLE_DEVICES) or
one CPU core (``num_cpus=1``; it claims a free core of its node with a lock file and pins itself,
and so every process of its cells, to that core). A worker runs one cell at a time exactly as the
sequential scheduler does (``CellRun``: a ``gpumon run --headless`` child) in a node-local directory,
then ships the cell's run directory and log back as a tar archive; the driver unpacks them into
the experiment directory, so cells.json, runs/ and logs/ look as if the cells had run here.
"""

from __future__ import annotations

import fcntl
import io
import os
import signal
import socket
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

from gpumon.core.jobs.interpreter import WorkloadPython
from gpumon.errors import EnvironmentFailure, UsageError
from gpumon.experiments.runner.cells import Cell
from gpumon.experiments.runner.manifest import FAILED, INTERRUPTED, CellRecord, Manifest
from gpumon.safewrite import ensure_folder, open_lock, write_bytes
from gpumon.experiments.runner.cellrun import CellRun

POLL_S = 0.5
CORE_LOCKS = Path(tempfile.gettempdir()) / "gpumon-ray-cores"
OBJECT_STORE_BYTES = (
    128 * 1024 * 1024
)  # cells return small archives; Ray's default would take 30 % of RAM
CORE_WAIT_S = 30.0
PROBE_S = 5.0  # for the head's port to take a connection before Ray is asked to join it
# Ray 2.59 turned token authentication on for clusters it starts; a driver joining one by address
# sends the token only in token mode (Ray 2.60; 2.61 makes it the default everywhere).
AUTH_HINT = (
    "if it uses token authentication, which Ray 2.59+ turns on for the clusters `ray start` makes, "
    "run with RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN or ~/.ray/auth_token"
)


def require_ray() -> ModuleType:
    """The ray module, or one clear line on how to get it."""
    try:
        # deferred: ray is the ray extra (+1.9 s wall to import)
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'gpumon[ray]'") from None
    return ray


def claim_core(wait_s: float = CORE_WAIT_S) -> tuple[int, int]:
    """A core of this node no other gpumon worker holds: (core, lock fd kept open for the worker's life).

    On a long-lived cluster the workers of the sweep before may still be exiting (``ray.kill`` does not
    wait), holding their cores for a moment: wait up to ``wait_s`` for one to be released.
    """
    ensure_folder(CORE_LOCKS)
    deadline = time.monotonic() + wait_s
    while True:
        for core in sorted(os.sched_getaffinity(0)):
            fd = open_lock(CORE_LOCKS / f"core-{core}.lock")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return core, fd
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"every core of this node was held by another gpumon worker for {wait_s:g} s"
            )
        time.sleep(0.2)


class _Quiet:
    """The progress a worker reports: none (the driver prints one line per finished cell)."""

    def tick(self) -> None:
        pass


class CellWorker:
    """One GPU or one pinned core; runs cells one at a time (a Ray actor, see ``RayPool``)."""

    def __init__(self, on_gpu: bool) -> None:
        self.core: int | None = None
        if not on_gpu:
            self.core, self._lock = claim_core()
            os.sched_setaffinity(0, {self.core})  # inherited by gpumon run and its workloads
        self.signal: int | None = None

    def where(self) -> dict[str, Any]:
        return {
            "core": self.core,
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "node": os.uname().nodename,
        }

    def interrupt(self) -> None:
        self.signal = signal.SIGINT

    def run(self, cell: Cell, pyspy: Any, python: WorkloadPython) -> tuple[dict[str, Any], bytes]:
        # Ray gave this worker one GPU as CUDA device 0; a CPU worker is pinned already
        local = replace(cell, device="cuda") if cell.device.startswith("cuda") else cell
        with tempfile.TemporaryDirectory(prefix="gpumon-ray-cell-") as tmp:
            directory = Path(tmp)
            record = CellRun(local, directory, pyspy, lambda: self.signal, python).execute(_Quiet())
            record.config = cell.config()
            if self.core is not None:
                record.note = "; ".join(
                    filter(None, [record.note, f"ran on core {self.core} of {os.uname().nodename}"])
                )
            return asdict(record), _archive(directory, record)


def _archive(directory: Path, record: CellRecord) -> bytes:
    """The cell's run directory and log as a tar archive, paths relative to the experiment directory."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for relative in (record.run, record.log):
            if relative and (directory / relative).exists():
                tar.add(directory / relative, arcname=relative)
    return buffer.getvalue()


class ArchiveOutside(ValueError):
    """A cell's archive names a path outside the experiment directory (absolute, or through ``..``)."""


def _member_path(directory: Path, name: str) -> Path:
    """Where archive member ``name`` goes under ``directory``; ArchiveOutside if that is not inside it. Python's own
    ``tarfile.data_filter`` does this from 3.11.4 on; the README's Python may be older."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        raise ArchiveOutside(f"a cell's archive names {name!r}, outside the experiment directory")
    return directory.joinpath(*parts)


def _unpack(data: bytes, directory: Path) -> None:
    """The archive's folders and plain files, written under ``directory`` (gpumon.safewrite; links skipped)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            target = _member_path(directory, member.name)
            if member.isdir():
                ensure_folder(target)
            elif member.isfile():
                source = tar.extractfile(member)
                assert source is not None  # a plain file's content
                ensure_folder(target.parent)
                write_bytes(target, source.read(), replace=True)


@dataclass
class RayPool:
    """The driver's side: a Ray connection and one worker per GPU (or core) of the cluster."""

    address: str | None
    on_gpu: bool
    ray: ModuleType = field(default_factory=require_ray)
    workers: list[Any] = field(default_factory=list)

    def start(self) -> int:
        """Connect (or start a local cluster using this machine's GPUs or cores); returns the worker count."""
        ray = self.ray
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if self.address:
            problem = unreachable(self.address)
            if problem:  # Ray would retry a dead address for minutes
                raise EnvironmentFailure(
                    f"--ray: nothing answers at {self.address}: {problem} (is `ray start --head` running there?)"
                )
            kwargs["address"] = self.address
        else:  # "local": a new cluster even where `ray start` made one or RAY_ADDRESS names one (ray.init() joins those)
            kwargs["address"] = "local"
            kwargs["object_store_memory"] = OBJECT_STORE_BYTES
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EnvironmentFailure(connect_error(self.address, exc, os.environ)) from None
        resources = ray.cluster_resources()
        count = int(resources.get("GPU", 0) if self.on_gpu else resources.get("CPU", 0))
        if count < 1:
            self.stop()
            raise UsageError(
                f"--ray: the cluster has no {'GPU' if self.on_gpu else 'CPU'} to run cells on"
            )
        options = {"num_gpus": 1, "num_cpus": 1} if self.on_gpu else {"num_cpus": 1}
        actor = ray.remote(**options, max_concurrency=2, max_restarts=0)(CellWorker)
        self.workers = [actor.remote(self.on_gpu) for _ in range(count)]
        return count

    def run(
        self,
        cells: list[Cell],
        manifest: Manifest,
        pyspy: Any,
        stop_requested: Callable[[], int | None],
        finished: Callable[[Cell, CellRecord], None],
        python: WorkloadPython,
    ) -> None:
        """Run ``cells`` on the idle workers as they free up, in the workloads' Python ``python``; ``finished`` is
        called here, in order of completion."""
        ray = self.ray
        pending = list(cells)
        idle = list(self.workers)
        running: dict[Any, tuple[Any, Cell]] = {}
        interrupted = False
        while pending or running:
            if stop_requested() is not None and not interrupted:
                interrupted = True
                pending.clear()
                for worker, _ in running.values():
                    worker.interrupt.remote()
            while idle and pending:
                worker, cell = idle.pop(0), pending.pop(0)
                running[worker.run.remote(cell, pyspy, python)] = (worker, cell)
            if not running:
                break
            done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            for ref in done:
                worker, cell = running.pop(ref)
                try:
                    record_data, archive = ray.get(ref)
                    _unpack(archive, manifest.directory)
                    record = CellRecord(**record_data)
                    idle.append(worker)
                except (
                    ray.exceptions.RayError
                ) as exc:  # the worker died (its node, or killed): the sweep goes on
                    record = CellRecord(
                        id=cell.id,
                        status=INTERRUPTED if interrupted else FAILED,
                        config=cell.config(),
                        reason=f"Ray worker lost: {type(exc).__name__}",
                    )
                except (
                    ArchiveOutside,
                    tarfile.TarError,
                ) as exc:  # what came back is not the cell's run
                    idle.append(worker)
                    record = CellRecord(
                        id=cell.id,
                        status=FAILED,
                        config=cell.config(),
                        reason=f"its results: {exc}",
                    )
                finished(cell, record)

    def stop(self) -> None:
        for worker in self.workers:
            self.ray.kill(worker)
        self.workers = []
        self.ray.shutdown()


def unreachable(address: str, timeout_s: float = PROBE_S) -> str | None:
    """Why nothing takes a TCP connection at a ``host:port`` address (None: something does, or the address has
    another form, ``ray://...`` or ``auto``, for Ray to resolve)."""
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit() or "://" in address:
        return None
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def connect_error(address: str | None, exc: Exception, env: Mapping[str, str]) -> str:
    """The one line for a cluster that could not be reached, with the token hint where it may be the cause."""
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    line = f"--ray: cannot reach a Ray cluster at {address or 'a new local cluster'}: {reason}"
    if address and env.get("RAY_AUTH_MODE", "").lower() != "token":
        line += f"; {AUTH_HINT}"
    return line


def describe(pool: RayPool) -> str:
    """Where the workers are: 'cores 0, 1 of vm' or 'GPUs 0, 1 of box'."""
    places = pool.ray.get([w.where.remote() for w in pool.workers])
    if pool.on_gpu:
        return ", ".join(f"GPU {p['gpus']} of {p['node']}" for p in places)
    return ", ".join(f"core {p['core']} of {p['node']}" for p in places)
