"""The Lightning callback of ``gpumon.callbacks.lightning`` for the ``pytorch_lightning`` package."""

from __future__ import annotations

from pytorch_lightning import Callback

from gpumon.callbacks.lightning import callback_class

GpumonCallback = callback_class(Callback)
