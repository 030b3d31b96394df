"""Declarative experiments: TOML specs (the shipped ones: the repository's ``experiments/*.toml``) expanded into cells,
run, resumed (``runner/``) and answered and reported (``study/``, which reads what the runner recorded).

The parent process never imports torch here; the only torch code is ``opprofile``, a child program.
"""
