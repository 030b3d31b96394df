"""Declarative experiments: ``experiments/*.toml`` specs expanded into cells, run, resumed and reported.

The parent process never imports torch here; the only torch code is ``opprofile``, a child program.
"""
