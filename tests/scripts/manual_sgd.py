"""A classic training loop with no optimizer: the weights are updated by hand (``w -= lr * w.grad``), so the
auto-probe, which counts ``optimizer.step()`` calls, sees no step. It trains until it is stopped."""

import torch

torch.manual_seed(0)
x = torch.randn(512, 64)
y = x @ torch.randn(64, 1)
w = torch.zeros(64, 1, requires_grad=True)
lr = 0.01
print("training with a manual SGD update", flush=True)
while True:
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
