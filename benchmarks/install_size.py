"""Install size and time of each way to install gpumon, in fresh venvs, beside nvitop's.

Builds a wheel of this tree, then for each case makes a fresh venv under the temporary directory,
times ``pip install`` and measures site-packages (du, apparent size) and what the install added to a
bare venv's (pip and setuptools, about 25 MB, are in every venv). Uses pip's own configuration
(local indexes on the development box). The ``gpumon[torch]`` case installs PyTorch (gigabytes):
``--skip-torch`` leaves it out. Prints figures measured in this run; asserts nothing.

    nice -n 10 python benchmarks/install_size.py [--skip-torch] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def tree_bytes(path: Path) -> int:
    """Apparent size of every regular file under ``path`` (symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                total += os.lstat(full).st_size
    return total


def build_wheel(work: Path) -> Path:
    """A wheel of a copy of the tree (so no build/ is left in the checkout)."""
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(
        REPO / "gpumon", source / "gpumon", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(work / "wheels"),
            str(source),
        ],
        check=True,
    )
    return next((work / "wheels").glob("gpumon-*.whl"))


def site_packages(venv: Path) -> Path:
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def install(work: Path, name: str, requirement: str | None) -> tuple[float, int, int]:
    """(seconds of pip install, bytes of site-packages, number of distributions) in a fresh venv."""
    venv = work / name
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    seconds = 0.0
    if requirement is not None:
        began = time.perf_counter()
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", requirement], check=True)
        seconds = time.perf_counter() - began
    site = site_packages(venv)
    dists = sum(1 for p in site.iterdir() if p.name.endswith(".dist-info"))
    return seconds, tree_bytes(site), dists


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-torch", action="store_true", help="leave out gpumon[torch] (gigabytes)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the venvs (printed) instead of deleting them"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpumon-install-size-"))
    try:
        wheel = build_wheel(work)
        cases = {
            "bare venv (pip, setuptools)": None,
            "gpumon (light)": str(wheel),
            "gpumon[analysis]": f"{wheel}[analysis]",
            "gpumon[torch]": f"{wheel}[torch]",
            "nvitop": "nvitop",
        }
        if args.skip_torch:
            del cases["gpumon[torch]"]
        results = {}
        for i, (name, requirement) in enumerate(cases.items()):
            results[name] = install(work, f"venv{i}", requirement)
            seconds, size, dists = results[name]
            print(
                f"  measured {name}: {seconds:.1f} s, {size / 1e6:.0f} MB",
                file=sys.stderr,
                flush=True,
            )
            if name == "gpumon[torch]" and not args.keep:
                shutil.rmtree(work / f"venv{i}")
        bare = results["bare venv (pip, setuptools)"][1]
        print(
            f"{'install':<30} {'pip install':>11} {'site-packages':>14} {'added':>10} {'distributions':>14}"
        )
        for name, (seconds, size, dists) in results.items():
            print(
                f"{name:<30} {seconds:10.1f}s {size / 1e6:12.0f}MB {(size - bare) / 1e6:8.0f}MB {dists:14d}"
            )
    finally:
        if args.keep:
            print(f"venvs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
