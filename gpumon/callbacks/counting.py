"""What a framework callback reports, framework-free: micro-batches, samples and tokens added up between two
optimizer steps, each step sent to the probe with its samples, and the meta that says what a step is."""

from __future__ import annotations

from typing import Any

from gpumon.core.probing import probe

COUNTS = "optimizer steps"
TOKENS_EVERY = (
    100  # steps between two looks at the tokens per sample (said again when it moved by 5 %)
)


def batch_size(batch: Any) -> int | None:
    """The number of samples in a batch: a tensor's first dimension, else the first tensor's of a list, tuple or
    dict (``input_ids`` first); None when no tensor says it."""
    if isinstance(batch, dict):
        first = batch.get("input_ids", next(iter(batch.values()), None))
        return batch_size(first)
    if isinstance(batch, (list, tuple)):
        return batch_size(batch[0]) if batch else None
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) > 0 else None


def batch_tokens(batch: Any) -> int | None:
    """The tokens of a batch with ``input_ids`` (its attention mask's ones when it has one); None otherwise."""
    if not isinstance(batch, dict) or "input_ids" not in batch:
        return None
    mask = batch.get("attention_mask")
    if mask is not None and hasattr(mask, "sum"):
        return int(mask.sum())
    ids = batch["input_ids"]
    return int(ids.numel()) if hasattr(ids, "numel") else None


class StepReport:
    """Micro-batches, samples and tokens since the last optimizer step; ``step()`` sends one to the probe."""

    def __init__(self, framework: str, micro_batches: int | None = None) -> None:
        self.framework = framework
        self.micro_batches = 0
        self.samples = 0
        self.tokens = 0
        self.sized = True  # every micro-batch of the step had a known size
        self.per_step = micro_batches
        self.tokens_per_sample: float | None = (
            None  # as last said: again every TOKENS_EVERY steps if it moved
        )
        self.counted = [0, 0, 0]  # steps, samples and tokens of the steps that had both
        probe.steps_from(framework)
        info: dict[str, Any] = {"counts": COUNTS, "framework": framework}
        if micro_batches:
            info["micro_batches"] = micro_batches
        probe.meta(**info)

    def micro_batch(self, samples: int | None, tokens: int | None = None) -> None:
        self.micro_batches += 1
        if samples is None:
            self.sized = False
        else:
            self.samples += samples
        self.tokens += tokens or 0

    def step(self, samples: int | None = None, tokens: int | None = None) -> None:
        """One optimizer step; ``samples``/``tokens``: the step's own, when the framework knows them better."""
        samples = samples if samples is not None else (self.samples if self.sized else None)
        tokens = tokens if tokens is not None else self.tokens
        if self.micro_batches and self.micro_batches != self.per_step:
            self.per_step = self.micro_batches
            probe.meta(micro_batches=self.micro_batches)
        if samples and tokens:
            self._tokens(samples, tokens)
        probe.step(samples=samples if samples else None)
        self.micro_batches = self.samples = self.tokens = 0
        self.sized = True

    def _tokens(self, samples: int, tokens: int) -> None:
        counted = self.counted
        counted[0] += 1
        counted[1] += samples
        counted[2] += tokens
        if counted[0] % TOKENS_EVERY != 1:
            return
        per_sample = round(counted[2] / counted[1], 1)
        said = self.tokens_per_sample
        if said is None or abs(per_sample - said) > 0.05 * said:
            self.tokens_per_sample = per_sample
            probe.meta(tokens_per_sample=per_sample)
