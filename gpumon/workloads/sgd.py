"""SGD with momentum on torch's multi-tensor (``_foreach``) kernels.

It does what ``torch.optim.SGD(params, lr, momentum)`` does with ``foreach=True`` (its default
on CUDA), with the same kernels. torch.optim is not used because importing its optimizers pulls
in torch._dynamo: about 1.2 s of CPU time per process start.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import Tensor, nn


class MomentumSGD:
    """``p -= lr * b`` with ``b = momentum * b + grad`` (plain SGD when momentum is 0)."""

    def __init__(self, params: Iterable[nn.Parameter], lr: float, momentum: float = 0.0) -> None:
        self.params: list[Tensor] = [p for p in params if p.requires_grad]
        self.lr = lr
        self.momentum = momentum
        self.buffers: list[Tensor] = []

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        grads = [p.grad for p in self.params if p.grad is not None]
        if len(grads) != len(self.params):
            raise RuntimeError("every parameter must receive a gradient in every step")
        if self.momentum:
            if self.buffers:
                torch._foreach_mul_(self.buffers, self.momentum)
                torch._foreach_add_(self.buffers, grads)
            else:
                self.buffers = [g.detach().clone() for g in grads]
            grads = self.buffers
        torch._foreach_add_(self.params, grads, alpha=-self.lr)
