"""A --cmd spec shows its script first (issue 43): ``main.py (python …/word_language_model/main.py --lr 20)``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpumon.core.records.specwords import shown_spec


def test_a_cmd_spec_shows_its_script_first_and_short_folders():
    assert shown_spec("cmd:/work/venv/bin/python /tmp/ex/word_language_model/main.py --lr 20") == (
        "main.py (python …/word_language_model/main.py --lr 20)"
    )
    assert shown_spec("cmd:python -m torch.distributed.run t.py") == (
        "torch.distributed.run (python -m torch.distributed.run t.py)"
    )
    assert shown_spec("cmd:python train.py") == "train.py"
    assert shown_spec("cmd:python train.py --lr 1") == "train.py (python train.py --lr 1)"


def test_what_is_not_a_python_script_reads_as_given():
    for spec in (
        "fcn:preset=tiny",
        "cmd:sleep 120",
        "cmd:python -c 'print(1)'",
        "cmd:python 'x.py",
    ):
        assert shown_spec(spec) == spec


@given(st.text(max_size=80))
def test_any_spec_reads_as_one_line_that_names_its_script(text):
    shown = shown_spec("cmd:" + text)
    assert isinstance(shown, str)
    if shown != "cmd:" + text:
        script = shown.split(" (", 1)[0]
        assert script and script in text
