"""The shape of gpumon's code, read from its syntax trees (ast): sizes, and where signals may be sent.

- no function over ``MAX_FUNCTION_LINES`` lines or ``MAX_BRANCHES`` branches, no class over ``MAX_CLASS_LINES``
  lines (issue 44);
- nothing under ``core/store`` sends a signal: records and run directories stay pure, process control is the
  jobs' (``core/jobs``);
- no run state or share mode compared as a string literal outside the enums that name them.
"""

from __future__ import annotations

import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[2] / "gpumon"
MAX_FUNCTION_LINES, MAX_BRANCHES, MAX_CLASS_LINES = 60, 20, 300
BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.match_case)


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _own_nodes(node: ast.AST):
    """The nodes of a function's body, not those of the functions and classes defined inside it."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            yield from _own_nodes(child)


def offenders() -> set[str]:
    """``path:name (what)`` for each function or class over its limit."""
    found = set()
    for path, tree in _modules():
        for node in ast.walk(tree):
            lines = (
                (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
            )
            if isinstance(node, ast.ClassDef) and lines > MAX_CLASS_LINES:
                found.add(f"{path}:{node.name} (class, {lines} lines)")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                branches = sum(isinstance(n, BRANCHES) for n in _own_nodes(node))
                if lines > MAX_FUNCTION_LINES or branches > MAX_BRANCHES:
                    found.add(f"{path}:{node.name} ({lines} lines, {branches} branches)")
    return found


def test_no_function_or_class_over_its_size() -> None:
    found = sorted(offenders())
    assert not found, "over the size limits:\n" + "\n".join(found)


def test_the_size_check_sees_a_long_function_and_a_branchy_one() -> None:
    long = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    branchy = "def g(x):\n" + "".join(f"    if x == {i}:\n        pass\n" for i in range(21))
    for source in (long, branchy):
        function = ast.parse(source).body[0]
        assert isinstance(function, ast.FunctionDef)
        lines = (function.end_lineno or 0) - function.lineno + 1
        branches = sum(isinstance(n, BRANCHES) for n in _own_nodes(function))
        assert lines > MAX_FUNCTION_LINES or branches > MAX_BRANCHES


# -- signals ---------------------------------------------------------------------------------------------------------

SIGNAL_FUNCTIONS = {"kill", "killpg", "pthread_kill", "pidfd_send_signal", "sigqueue"}
SIGNAL_METHODS = {"send_signal", "terminate", "kill"}


def signal_sends(tree: ast.AST) -> list[int]:
    """Lines that send a signal: os.kill / killpg, signal.pthread_kill / pidfd_send_signal, a process's
    send_signal / terminate / kill."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = (
            fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        )
        if name in SIGNAL_FUNCTIONS or name in SIGNAL_METHODS:
            lines.append(node.lineno)
    return lines


def test_nothing_under_core_store_sends_a_signal() -> None:
    sends = [
        f"{path}:{line}"
        for path, tree in _modules()
        if path.startswith("gpumon/core/store/")
        for line in signal_sends(tree)
    ]
    assert not sends, "core/store sends signals (move them to core/jobs): " + ", ".join(sends)


def test_the_signal_scan_sees_each_way_to_send_one() -> None:
    source = (
        "import os, signal\nos.kill(1, 15)\nos.killpg(1, 15)\nsignal.pidfd_send_signal(3, 15)\n"
        "p.send_signal(15)\np.terminate()\np.kill()\nsignal.pthread_kill(1, 15)\n"
    )
    assert signal_sends(ast.parse(source)) == [2, 3, 4, 5, 6, 7, 8]


# -- literals --------------------------------------------------------------------------------------------------------

RUN_STATES = {"recording", "complete", "truncated", "interrupted", "running", "starting", "exited"}
RUN_STATES |= {"stopped", "not started", "detached", "failed"}
SHARE_MODES = {"timeslice", "mps", "cpu cores"}


def literal_compares(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, literal) of each comparison against a run state or share mode spelled as a string."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = side.elts if isinstance(side, (ast.Tuple, ast.Set, ast.List)) else [side]
                for value in values:
                    if isinstance(value, ast.Constant) and value.value in RUN_STATES | SHARE_MODES:
                        found.append((node.lineno, value.value))
    return found


def test_no_run_state_or_share_mode_compared_as_a_string() -> None:
    compares = [
        f"{path}:{line} {text!r}"
        for path, tree in _modules()
        for line, text in literal_compares(tree)
    ]
    assert not compares, "compare against the enums instead:\n" + "\n".join(compares)
