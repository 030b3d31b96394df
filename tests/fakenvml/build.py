"""Build the scripted fake libnvidia-ml.so.1 and set up the environment that loads it.

Used by tests and benchmarks: ``build(dir, variant)`` compiles ``fakenvml.c`` with the
system C compiler; ``environment(...)`` returns an environment in which a *new*
process loads the fake through pynvml (``LD_LIBRARY_PATH`` is read at process start,
so the code under test always runs in a subprocess). Scenario format: docs/nvml.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

SOURCE = Path(__file__).with_name("fakenvml.c")
LIBRARY = "libnvidia-ml.so.1"

# Build variants: which versioned symbols exist, as in older drivers.
VARIANTS: dict[str, tuple[str, ...]] = {
    "full": (),
    "no_v3": ("-DNO_V3", "-DNO_MEMINFO_V2", "-DNO_TEMPERATURE_V"),
    "v1_only": ("-DNO_V3", "-DNO_V2", "-DNO_MEMINFO_V2", "-DNO_TEMPERATURE_V"),
}


def compiler() -> str | None:
    """The C compiler to use ($CC, cc, gcc or clang), or None when there is none."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build(out_dir: Path, variant: str = "full") -> Path:
    """Compile the fake into ``out_dir/<variant>/libnvidia-ml.so.1``; return that directory."""
    return build_all(out_dir, (variant,))[variant]


def build_all(out_dir: Path, variants: tuple[str, ...] = tuple(VARIANTS)) -> dict[str, Path]:
    """Compile several variants at once (one compiler process each); variant → library directory."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc, clang) on PATH")
    jobs = {}
    for variant in variants:
        lib_dir = Path(out_dir) / variant
        lib_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            cc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fvisibility=hidden",
            *VARIANTS[variant],
            "-o",
            str(lib_dir / LIBRARY),
            str(SOURCE),
            "-lm",
            "-lpthread",
        ]
        jobs[variant] = (lib_dir, subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True))
    for variant, (_, proc) in jobs.items():
        _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"building the fake NVML ({variant}) failed:\n{stderr}")
    return {variant: lib_dir for variant, (lib_dir, _) in jobs.items()}


def write_scenario(path: Path, text: str) -> Path:
    """Write a scenario (dedented) to ``path``; return the path."""
    path = Path(path)
    path.write_text(textwrap.dedent(text).strip() + "\n")
    return path


class Clock:
    """A file that sets the fake's time (seconds since nvmlInit) when FAKENVML_CLOCK names it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.set(0.0)

    def set(self, seconds: float) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{seconds!r}\n")
        tmp.replace(self.path)


def environment(
    lib_dir: Path | None,
    scenario: Path | None = None,
    clock: Path | None = None,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """An environment whose processes load the fake from ``lib_dir`` (None: no library at all)."""
    env = dict(os.environ if base is None else base)
    for key in ("FAKENVML_SCRIPT", "FAKENVML_CLOCK", "CUDA_VISIBLE_DEVICES"):
        env.pop(key, None)
    env["LD_LIBRARY_PATH"] = str(lib_dir) if lib_dir is not None else ""
    if scenario is not None:
        env["FAKENVML_SCRIPT"] = str(scenario)
    if clock is not None:
        env["FAKENVML_CLOCK"] = str(clock)
    return env
