"""Import contract: gpumon/core never imports Textual or torch; the CLI's light paths never import torch."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import gpumon.core

CORE = Path(gpumon.core.__file__).parent
FORBIDDEN = ("textual", "torch")
# Child-side code may import torch lazily, inside these functions only (never at import time).
CHILD_SIDE_TORCH = {("probe.py", "copy")}


def _roots(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return {node.module.split(".")[0]}
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__"):
        return {a.value.split(".")[0] for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return set()


def _forbidden_imports(path: Path) -> list[tuple[str, str]]:
    """(module, where) for every import of textual, and every torch import outside the allowed functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = [(root, "<module>") for node in ast.walk(tree) for root in _roots(node) & {"textual"}]
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inside = {id(sub): f.name for f in functions for sub in ast.walk(f)}
    for node in ast.walk(tree):
        if "torch" in _roots(node):
            where = inside.get(id(node), "<module>")
            if (path.name, where) not in CHILD_SIDE_TORCH:
                found.append(("torch", where))
    return found


def test_no_core_module_imports_textual_or_torch():
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10
    offenders = {str(f.relative_to(CORE)): _forbidden_imports(f) for f in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def _loaded_after(code: str) -> dict[str, bool]:
    probe = code + f"\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {FORBIDDEN!r}}}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_core_module_loads_neither_textual_nor_torch():
    names = [m.name for m in pkgutil.walk_packages(gpumon.core.__path__, "gpumon.core.")]
    assert "gpumon.core.session" in names and "gpumon.core.sources.replay" in names
    loaded = _loaded_after("import importlib\n" + "".join(f"importlib.import_module({n!r})\n" for n in names))
    assert loaded == {"textual": False, "torch": False}


def test_cli_and_run_help_never_import_torch():
    assert _loaded_after("import gpumon.cli")["torch"] is False
    code = "from gpumon.cli import main\ntry:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(code)["torch"] is False


def test_the_monitor_app_never_imports_torch():
    assert _loaded_after("import gpumon.tui.app")["torch"] is False


ANALYSIS_ONLY = ("scipy", "matplotlib", "pyarrow", "torch")
FIRST_FRAME = """
import asyncio, json, sys, tempfile
from pathlib import Path
from gpumon.core.plan import make_plan
from gpumon.core.session import SessionConfig
from gpumon.tui.app import GpumonApp
from gpumon.tui.controller import Controller

async def main():
    config = SessionConfig(device="cpu", runs_dir=Path(tempfile.mkdtemp()), nvml=False)
    app = GpumonApp(Controller(make_plan([], [], session=config, label=None, duration_s=None, stagger_s=0.0)))
    async with app.run_test() as pilot:
        while app.monitor is None or not app.monitor.is_mounted:
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))

asyncio.run(main())
"""


def test_the_monitors_first_frame_waits_for_no_analysis_library():
    """The light install has no scipy, matplotlib, pyarrow or torch: the live monitor must not need them."""
    code = FIRST_FRAME.format(modules=ANALYSIS_ONLY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
