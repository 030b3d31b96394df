"""A Hugging Face ``Trainer`` callback that reports optimizer steps, micro-batches (``gradient_accumulation_steps``),
samples and tokens to gpumon's probe. ``transformers`` is imported here, in the training process."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from gpumon.callbacks.counting import StepReport


class GpumonCallback(TrainerCallback):
    """Each optimizer step (``on_step_end``) with its micro-batches (``on_substep_end`` between), samples (the
    per-device batch times the processes) and tokens (``num_input_tokens_seen``, when the Trainer counts them)."""

    def __init__(self) -> None:
        self.report: StepReport | None = None
        self.tokens_seen = 0
        self.batch = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.report = StepReport("transformers", int(args.gradient_accumulation_steps))
        self.batch = int(args.per_device_train_batch_size) * max(1, int(args.world_size))
        self.tokens_seen = int(state.num_input_tokens_seen or 0)

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.report is not None:
            self.report.micro_batch(self.batch)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.report is None:
            return
        self.report.micro_batch(self.batch)
        seen = int(state.num_input_tokens_seen or 0)
        tokens, self.tokens_seen = seen - self.tokens_seen, seen
        self.report.step(tokens=tokens or None)
