"""Import contract: gpumon/core never imports Textual, torch or the workloads package; nothing below the CLI
imports the CLI; the CLI's light paths never import torch; rates and verdicts are defined once; no two modules
import each other."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpumon
from tests.helpers import FIRST_FRAME
import gpumon.core

PACKAGE = Path(gpumon.__file__).parent
CORE = Path(gpumon.core.__file__).parent
FORBIDDEN = ("textual", "torch")
# Child-side code may import torch lazily, inside these functions only (never at import time).
CHILD_SIDE_TORCH = {("probe.py", "copy")}


def _roots(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return {node.module.split(".")[0]}
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
        "import_module",
        "__import__",
    ):
        return {
            a.value.split(".")[0]
            for a in node.args[:1]
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        }
    return set()


def _forbidden_imports(path: Path) -> list[tuple[str, str]]:
    """(module, where) for every import of textual, and every torch import outside the allowed functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = [(root, "<module>") for node in ast.walk(tree) for root in _roots(node) & {"textual"}]
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
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
    probe = (
        code
        + f"\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {FORBIDDEN!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_core_module_loads_neither_textual_nor_torch():
    names = [m.name for m in pkgutil.walk_packages(gpumon.core.__path__, "gpumon.core.")]
    assert "gpumon.core.capture.session" in names and "gpumon.core.sources.replay" in names
    loaded = _loaded_after(
        "import importlib\n" + "".join(f"importlib.import_module({n!r})\n" for n in names)
    )
    assert loaded == {"textual": False, "torch": False}


def test_cli_and_run_help_never_import_torch():
    assert _loaded_after("import gpumon.cli")["torch"] is False
    code = "from gpumon.cli import main\ntry:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass"
    assert _loaded_after(code)["torch"] is False


def test_building_the_parser_leaves_doctor_and_nvml_unimported():
    """Every command parses its arguments first: `gpumon compare` must not pay for doctor's NVML imports."""
    code = (
        "import json, sys\nfrom gpumon.cli import build_parser\nbuild_parser().parse_args(['compare', '--shared', 'x'])\n"
        "print(json.dumps(sorted(m for m in ('gpumon.checks.doctor', 'pynvml', 'gpumon.core.sources.nvml') if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_monitor_app_never_imports_torch():
    assert _loaded_after("import gpumon.tui.app")["torch"] is False


ANALYSIS_ONLY = ("scipy", "matplotlib", "pyarrow", "torch")
# what the test does once the first frame is up: after a moment, print the analysis libraries loaded
AFTER_FIRST_FRAME = """\
        await pilot.pause(0.3)
        print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))"""


def test_the_monitors_first_frame_waits_for_no_analysis_library():
    """The light install has no scipy, matplotlib, pyarrow or torch: the live monitor must not need them."""
    code = FIRST_FRAME.format(then=AFTER_FIRST_FRAME.format(modules=ANALYSIS_ONLY))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


# What each light path must not load: the deferred imports that keep them out say what they save (benchmarks/
# startup.py --deferred); this fails if one of them moves to the top of its module.
LIGHT_PATHS = {
    "gpumon --help": (
        "import contextlib, io\nfrom gpumon.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass",
        ("numpy", "pandas", "psutil", "pynvml", "textual", "torch"),
    ),
    "gpumon runs": (
        "import contextlib, io\nfrom gpumon.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['runs', {runs!r}])",
        ("numpy", "pandas", "textual", "torch"),
    ),
    "a session's start": (
        "from gpumon.core.capture.session import Session, SessionConfig\n"
        "session = Session(SessionConfig(nvml=False, runs_dir={runs!r}))\nsession.start()\nsession.shutdown()",
        ("numpy", "pandas", "pynvml", "textual", "torch"),
    ),
    "import gpumon.probe": ("import gpumon.probe", ("numpy", "psutil", "socket", "torch")),
}


@pytest.mark.parametrize("path", sorted(LIGHT_PATHS))
def test_light_paths_load_no_heavy_library(path, tmp_path):
    """``gpumon --help``, ``gpumon runs``, a session's start and the probe's import load none of the libraries
    their deferred imports keep out."""
    runs = tmp_path / "runs"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "h100_q4", runs)
    code, heavy = LIGHT_PATHS[path]
    code = code.format(runs=str(runs)) + (
        f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.__stdout__)"
    )
    env = {**os.environ, "GPUMON_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def _modules_imported(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (``from a.b import c`` counts as a.b and a.b.c), at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _importers(files: list[Path], target: str) -> list[str]:
    hits = []
    for f in files:
        if any(name == target or name.startswith(target + ".") for name in _modules_imported(f)):
            hits.append(str(f.relative_to(PACKAGE)))
    return sorted(hits)


def test_the_core_never_imports_the_workloads_package():
    """The parent is torch-free by construction: the core cannot reach the harness or the models."""
    assert _importers(sorted(CORE.rglob("*.py")), "gpumon.workloads") == []


def test_only_the_entry_point_imports_the_cli():
    """No circle: analysis, experiments, the TUI and the core never import gpumon.cli."""
    files = [
        f
        for f in sorted(PACKAGE.rglob("*.py"))
        if f.name != "__main__.py" and f != PACKAGE / "cli.py"
    ]
    assert len(files) > 50
    assert _importers(files, "gpumon.cli") == []


# Each of these is defined in gpumon/core/records/rates.py and nowhere else in the package.
RATE_DEFINITIONS = {
    "slope",
    "exclusive_rate",
    "shared_rate",
    "live_rate",
    "overlap_window",
    "slowdown",
    "stp",
    "verdict",
    "interference",
    "Interference",
    "OverlapRates",
}


def test_rates_slowdown_stp_and_the_verdict_are_defined_once():
    rates = CORE / "records" / "rates.py"
    defined: dict[str, list[str]] = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and node.name in RATE_DEFINITIONS
            ):
                defined.setdefault(node.name, []).append(str(f.relative_to(PACKAGE)))
            if isinstance(node, ast.Assign) and f != rates:
                for target in node.targets:
                    if isinstance(target, ast.Tuple) and {
                        getattr(e, "id", "") for e in target.elts
                    } & {"PAYS", "LOSES"}:
                        defined.setdefault("verdict words", []).append(str(f.relative_to(PACKAGE)))
    assert defined.pop("verdict words", []) == []
    assert defined == {name: ["core/records/rates.py"] for name in defined}
    assert set(defined) == RATE_DEFINITIONS - {"shared_rate"}


def _busy_time_names(tree: ast.AST) -> set[str]:
    """Names holding a sum of step durations: ``x = sum(... iter_s ...)``, ``x = ...["iter_s"].sum()``, ``x += s.iter_s``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _sums_durations(node.value):
            names.update(ast.unparse(t) for t in node.targets)
        elif isinstance(node, ast.AugAssign) and "iter_s" in ast.unparse(node.value):
            names.add(ast.unparse(node.target))
    return names


def _sums_durations(expr: ast.AST) -> bool:
    text = ast.unparse(expr)
    return "iter_s" in text and ("sum(" in text or ".sum()" in text)


def test_no_rate_divides_by_busy_time():
    """Iterations per second is wall-clock everywhere: nothing divides by a sum of step durations (iter_s)."""
    offenders = []
    for f in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        busy = _busy_time_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                right = ast.unparse(node.right)
                if _sums_durations(node.right) or any(
                    right == name or right.startswith(name + " ") for name in busy
                ):
                    offenders.append(f"{f.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_the_busy_time_check_catches_what_it_forbids(tmp_path):
    """The check above fails on the live rate and the TUI's exclusive phase as they were before core/records/rates.py."""
    old = """
busy = sum(s.iter_s for s in steps)
rate = len(steps) / busy if busy > 0 else 0.0
slot.exclusive_busy += step.iter_s
x = slot.exclusive_steps / slot.exclusive_busy
"""
    tree = ast.parse(old)
    busy = _busy_time_names(tree)
    divs = [
        ast.unparse(n.right)
        for n in ast.walk(tree)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
    ]
    assert busy == {"busy", "slot.exclusive_busy"} and all(d in busy for d in divs)


def test_every_front_end_calls_the_one_definition():
    """The live line, the TUI, runs/--baseline, compare, its intervals and experiments import gpumon.core.records.rates."""
    for module in (
        "core/interference/live.py",
        "tui/model.py",
        "core/store/trace.py",
        "analysis/rates.py",
        "analysis/slowdown.py",
        "analysis/compare.py",
        "frontends/headless.py",
        "experiments/runner/steady.py",
        "core/capture/metrics.py",
    ):
        assert "gpumon.core.records.rates" in _modules_imported(PACKAGE / module), module


def test_predict_needs_neither_torch_nor_scipy():
    """``gpumon predict`` runs on the light install: its whole answer imports neither; where pyarrow is there
    (the analysis extra) it reads the tables with it and imports no pandas either (0.4 s of its cold start)."""
    import importlib.util

    data = Path(__file__).resolve().parents[1] / "data" / "h100_q4"
    code = (
        "import contextlib, io, sys\nfrom gpumon.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['predict', '--exclusive', {str(data / 'x-fcn')!r}, '--exclusive', {str(data / 'x-gemm')!r}, "
        "'--share', 'all', '--json'])\n"
        "import json\nprint(json.dumps({m: m in sys.modules for m in ('torch', 'scipy', 'pandas')}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert (loaded["torch"], loaded["scipy"]) == (False, False)
    if importlib.util.find_spec("pyarrow") is not None:
        assert loaded["pandas"] is False


def _imported_modules(path: Path, module: str, modules: set[str]) -> set[str]:
    """The gpumon modules ``module`` (at ``path``) imports, at any depth of its code, TYPE_CHECKING blocks included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {name for name in names if name in modules and name not in (module, "gpumon")}
    return found


def test_no_two_modules_import_each_other():
    """Imports point one way, down the layers: no cycle in the graph of gpumon's modules (functions' and
    TYPE_CHECKING imports count too: they tie the two modules together all the same)."""
    paths = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph = {m: _imported_modules(p, m, set(paths)) for m, p in paths.items()}
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                cycles.append(path[path.index(imported) :] + [imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "modules that import each other: " + "; ".join(
        " -> ".join(c) for c in cycles
    )


# The packages, lowest first: a module imports only from its own layer and those below it (docs/architecture.md).
# Packages whose __init__ holds only a docstring (no imports): they belong to no layer.
PACKAGE_DOCSTRINGS = ("gpumon", "gpumon.core", "gpumon.experiments")
LAYERS = (
    ("gpumon.errors", "gpumon.extras", "gpumon.safewrite"),
    ("gpumon.core.records",),
    ("gpumon.core.store",),
    ("gpumon.core.sources",),
    ("gpumon.core.probing",),
    ("gpumon.core.jobs",),
    ("gpumon.core.interference",),
    ("gpumon.core.capture",),
    ("gpumon.probe", "gpumon.workloads", "gpumon.callbacks"),  # the child side
    ("gpumon.analysis",),
    ("gpumon.console",),
    ("gpumon.frontends",),
    ("gpumon.checks",),
    ("gpumon.experiments.runner",),
    ("gpumon.experiments.study",),
    ("gpumon.tui",),
    ("gpumon.commands",),
    ("gpumon.cli", "gpumon.__main__"),
)


def layer_of(module: str) -> int:
    """The index in LAYERS of the package ``module`` belongs to; KeyError for a module no layer names."""
    for index, packages in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return index
    raise KeyError(module)


def _upward_imports() -> list[str]:
    paths = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    upward = []
    for module, path in sorted(paths.items()):
        if module in PACKAGE_DOCSTRINGS:
            continue
        for imported in sorted(_imported_modules(path, module, set(paths))):
            if layer_of(imported) > layer_of(module):
                upward.append(f"{module} -> {imported}")
    return upward


def test_every_module_belongs_to_a_layer():
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
            ".__init__"
        )
        if module not in PACKAGE_DOCSTRINGS:
            layer_of(module)


def test_no_package_imports_a_higher_one():
    assert _upward_imports() == []


def test_the_layer_check_catches_an_upward_import(tmp_path, monkeypatch):
    """A store module importing the capture (one layer far above it) is reported."""
    store = PACKAGE / "core" / "store" / "runstore.py"
    original = store.read_text(encoding="utf-8")
    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, encoding=None: (
            original + "\nfrom gpumon.core.capture.session import Session\n"
            if self == store
            else Path.open(self, encoding=encoding).read()
        ),
    )
    assert "gpumon.core.store.runstore -> gpumon.core.capture.session" in _upward_imports()
