"""Public probe API for training scripts: ``from gpumon import probe``; see docs/probe.md."""

from gpumon.core.probing.probe import add_copy, copy, enabled, flush, meta, step

__all__ = ["add_copy", "copy", "enabled", "flush", "meta", "step"]
