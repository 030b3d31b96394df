"""Declarative experiments: TOML specs (the shipped ones: ``specs/*.toml``) expanded into cells, run, resumed and reported.

The parent process never imports torch here; the only torch code is ``opprofile``, a child program.
"""
