"""A Lightning callback that reports optimizer steps (not batches: ``accumulate_grad_batches=4`` is 4 micro-batches
a step), micro-batches, samples and tokens to gpumon's probe. ``lightning`` is imported here, in the training
process; ``pytorch_lightning`` has its own (``gpumon.callbacks.pytorch_lightning``)."""

from __future__ import annotations

from typing import Any

from gpumon.callbacks.counting import StepReport, batch_size, batch_tokens


def callback_class(base: type) -> type:
    """A callback class on ``base`` (``lightning.pytorch.Callback`` or ``pytorch_lightning.Callback``: each
    Lightning accepts only its own)."""

    class GpumonCallback(base):  # the base is the framework's, given at run time
        """Reports each optimizer step with the samples and tokens of its micro-batches (``trainer.global_step``
        moves once per optimizer step, whatever the accumulation)."""

        def __init__(self) -> None:
            super().__init__()
            self.report: StepReport | None = None
            self.global_step = 0

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            accumulate = getattr(trainer, "accumulate_grad_batches", None)
            self.report = StepReport(
                "lightning", accumulate if isinstance(accumulate, int) else None
            )
            self.global_step = trainer.global_step

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            if self.report is None:
                return
            self.report.micro_batch(batch_size(batch), batch_tokens(batch))
            if trainer.global_step != self.global_step:
                self.global_step = trainer.global_step
                self.report.step()

    return GpumonCallback


try:
    from lightning.pytorch import Callback
except ImportError:  # pragma: no cover - the import error says which package is missing
    raise ImportError(
        "gpumon.callbacks.lightning needs the lightning package "
        "(pytorch_lightning: gpumon.callbacks.pytorch_lightning)"
    ) from None

GpumonCallback = callback_class(Callback)
