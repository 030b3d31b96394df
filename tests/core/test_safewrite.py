"""gpumon.safewrite: the one way gpumon writes a file."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import gpumon

from gpumon.safewrite import (
    UnsafeDestination,
    ensure_folder,
    open_new,
    replacing,
    write_bytes,
    write_text,
)


def test_replacing_writes_the_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "report.md"
    write_text(target, "old\n", replace=False)
    write_text(target, "new\n", replace=True)
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_an_existing_file_is_kept_unless_replace(tmp_path):
    target = tmp_path / "a.csv"
    target.write_text("mine")
    with pytest.raises(UnsafeDestination, match="already exists"):
        write_bytes(target, b"x", replace=False)
    assert target.read_text() == "mine"


@pytest.mark.parametrize("replace", [False, True])
def test_a_symlinked_destination_is_refused_and_its_target_untouched(tmp_path, replace):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").symlink_to(victim)
    with pytest.raises(UnsafeDestination, match="symbolic link"):
        write_text(tmp_path / "out" / "report.md", "overwritten", replace=replace)
    with pytest.raises(UnsafeDestination):
        open_new(tmp_path / "out" / "report.md")
    assert victim.read_text() == "precious"


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target, replace=True) as f:
        f.write("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_a_planted_temporary_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "steps.parquet"
    (tmp_path / f".steps.parquet.{os.getpid()}.0.tmp").symlink_to(victim)
    write_bytes(target, b"data", replace=False)
    assert target.read_bytes() == b"data" and victim.read_text() == "precious"


def test_a_folder_others_can_write_is_refused(tmp_path):
    shared = ensure_folder(tmp_path / "shared")
    shared.chmod(0o777)
    with pytest.raises(UnsafeDestination, match="other users"):
        write_text(shared / "x", "y", replace=False)
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot replace what we write
    write_text(shared / "x", "y", replace=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another user owns")
def test_a_folder_of_another_user_is_refused_even_to_root(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 4321, 4321)
    with pytest.raises(UnsafeDestination, match="another user"):
        write_text(theirs / "steps.parquet", "x", replace=False)
    assert list(theirs.iterdir()) == []


def test_open_new_never_opens_an_existing_file(tmp_path):
    target = tmp_path / "steps.csv"
    with open_new(target) as f:
        f.write("a,b\n")
    with pytest.raises(FileExistsError):
        open_new(target)
    assert target.read_text() == "a,b\n"


# --- no module of gpumon but gpumon/safewrite.py opens a file for writing --------------------------------

PACKAGE = Path(gpumon.__file__).parent
WRITE_MODE = set("wax+")
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
SAFE_OPENERS = {
    "replacing",
    "open_new",
    "open_append",
    "file",
}  # gpumon.safewrite's (``batch.file``)
PATH_WRITERS = {
    "to_csv",
    "to_parquet",
    "to_pickle",
    "to_feather",
    "to_excel",
    "savefig",
    "write_table",
    "tofile",
}
ALWAYS = {
    "write_text",
    "write_bytes",
    "mkstemp",
    "NamedTemporaryFile",
    "TemporaryFile",
    "SpooledTemporaryFile",
    "extractall",
    "extract",
}
SHUTIL = {"copy", "copy2", "copyfile", "copytree", "copyfileobj", "move"}
# (module, function): writes that are not gpumon's to route through safewrite
ALLOWED = {
    # moved out of run directories by issue 41
    ("gpumon/core/store/trace.py", "write_steps_cache"),
}


def _name(node: ast.expr) -> str:
    """The called name: ``open`` of ``open(...)``, ``to_csv`` of ``frame.to_csv(...)``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _owner(node: ast.expr) -> str:
    """``os`` of ``os.open``; "" for a plain name."""
    return _name(node.value) if isinstance(node, ast.Attribute) else ""


def _mode(call: ast.Call, position: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "mode":
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _writes_mode(mode: ast.expr | None) -> bool:
    """A mode that writes, or one the test cannot read (not a constant): both are reported."""
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(WRITE_MODE & set(mode.value))
    return True


def _flags(node: ast.expr) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _is_devnull(call: ast.Call) -> bool:
    return bool(call.args) and ast.unparse(call.args[0]) == "os.devnull"


def _safe_names(tree: ast.AST) -> set[str]:
    """Names bound by ``with replacing(...) as f`` (and the other safewrite openers): files safewrite made."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                call = item.context_expr
                if (
                    isinstance(call, ast.Call)
                    and _name(call.func) in SAFE_OPENERS
                    and isinstance(item.optional_vars, ast.Name)
                ):
                    names.add(item.optional_vars.id)
    return names


def _opens_for_writing(call: ast.Call, safe: set[str]) -> bool:
    name, owner = _name(call.func), _owner(call.func)
    if _is_devnull(call):
        return False  # /dev/null: nothing is written
    if name == "open" and (isinstance(call.func, ast.Name) or owner == "io"):
        return _writes_mode(_mode(call, 1))
    if name == "open" and owner == "os":
        return bool(len(call.args) > 1 and WRITE_FLAGS & _flags(call.args[1]))
    if name == "open" and owner == "tarfile":
        to_memory = any(k.arg == "fileobj" for k in call.keywords)
        return not to_memory and _writes_mode(_mode(call, 1))
    if (
        name == "open"
    ):  # Path.open(mode); a name that is not a mode (Manifest.open(folder)) is another open
        mode = _mode(call, 0)
        return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and _writes_mode(mode)
    if name == "fdopen":
        return _writes_mode(_mode(call, 1))
    if name in PATH_WRITERS:  # frame.to_json() with no destination returns the text
        first = call.args[0] if call.args else None
        return first is not None and not (isinstance(first, ast.Name) and first.id in safe)
    if name in SHUTIL:
        return owner == "shutil"
    if name in ALWAYS:
        return isinstance(call.func, ast.Attribute) or name not in ("write_text", "write_bytes")
    return False


def writes_outside_safewrite(source: str, module: str) -> list[str]:
    """``module:line: code`` of every call in ``source`` that opens a file for writing by itself."""
    tree = ast.parse(source)
    safe = _safe_names(tree)
    allowed_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (module, node.name) in ALLOWED:
            allowed_lines |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return [
        f"{module}:{node.lineno}: {ast.unparse(node)[:80]}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node.lineno not in allowed_lines
        and _opens_for_writing(node, safe)
    ]


def test_no_module_but_safewrite_opens_a_file_for_writing():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE.parent).as_posix()
        if module != "gpumon/safewrite.py":
            found += writes_outside_safewrite(path.read_text(encoding="utf-8"), module)
    assert found == [], "write through gpumon.safewrite instead:\n" + "\n".join(found)


PLANTED = [
    'open(path, "w")',
    'open(path, mode="ab")',
    "open(path, chosen_mode)",
    'io.open(path, "x")',
    'Path(path).open("a")',
    'path.write_text("x")',
    'path.write_bytes(b"x")',
    "os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)",
    "os.open(path, os.O_RDWR)",
    'os.fdopen(fd, "w")',
    "tempfile.mkstemp(dir=folder)",
    "tempfile.NamedTemporaryFile(dir=folder)",
    "frame.to_csv(folder / 'x.csv')",
    "frame.to_parquet('x.parquet')",
    "fig.savefig(folder / 'x.png', dpi=100)",
    "pq.write_table(table, tmp)",
    "array.tofile(path)",
    'tarfile.open(path, "w:gz")',
    "tar.extractall(folder)",
    "shutil.copy(a, b)",
    "shutil.move(a, b)",
]


@pytest.mark.parametrize("code", PLANTED)
def test_the_write_check_catches_a_planted_write(code):
    """Each form of opening a file for writing, planted in a module, is reported (the check can fail)."""
    source = f"def planted(path, folder, fd, frame, fig, table, array, tar, a, b, chosen_mode):\n    {code}\n"
    assert writes_outside_safewrite(source, "gpumon/core/store/planted.py") == [
        f"gpumon/core/store/planted.py:2: {ast.unparse(ast.parse(code))}"
    ]


@pytest.mark.parametrize(
    "code",
    [
        "open(path)",
        'open(path, "rb")',
        'Path(path).open(encoding="utf-8")',
        "os.open(path, os.O_RDONLY | os.O_NONBLOCK)",
        'tarfile.open(fileobj=buffer, mode="w:gz")',
        "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)",
        'write_text(path, "x", replace=True)',
    ],
)
def test_the_write_check_passes_reads_and_safewrite(code):
    source = f"def fine(path, buffer):\n    {code}\n"
    assert writes_outside_safewrite(source, "gpumon/core/store/fine.py") == []


def test_a_file_safewrite_made_may_be_written_by_a_library_but_the_allowed_function_is_the_only_exception():
    through = "def f(path, frame):\n    with replacing(path, replace=True) as out:\n        frame.to_csv(out)\n"
    assert writes_outside_safewrite(through, "gpumon/x.py") == []
    cache = "def write_steps_cache(run_dir, table):\n    pq.write_table(table, run_dir / 'x')\n"
    assert writes_outside_safewrite(cache, "gpumon/core/store/trace.py") == []
    assert writes_outside_safewrite(cache, "gpumon/core/store/other.py") != []
