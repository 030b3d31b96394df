"""The six built-in training tasks: model, sample layout, loss and optimizer settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpumon.workloads.samples import Field

Sizes = dict[str, int | float]
LossFn = Callable[[nn.Module, Sequence[Tensor]], Tensor]


@dataclass
class Task:
    """What the harness needs to train one workload."""

    model: nn.Module
    fields: tuple[Field, ...]
    loss: LossFn
    lr: float
    momentum: float = 0.0
    clip: float | None = None
    sequential: bool = False


def classification_loss(model: nn.Module, batch: Sequence[Tensor]) -> Tensor:
    inputs, labels = batch
    return F.cross_entropy(model(inputs), labels)


def scaled_lr(base: float, sizes: Sizes) -> float:
    """The linear scaling rule: ``base`` is the published learning rate for batch 256."""
    return base * int(sizes["batch"]) / 256


def image_fields(sizes: Sizes) -> tuple[Field, ...]:
    image = int(sizes["image"])
    return (
        Field("images", (3, image, image), "pixels"),
        Field("labels", (), "labels", int(sizes["classes"])),
    )


def build_fcn(sizes: Sizes) -> Task:
    width = int(sizes["width"])
    widths = [int(sizes["inputs"]), width, width, width, width]
    layers: list[nn.Module] = []
    for fan_in, fan_out in zip(widths, widths[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU(inplace=True)]
    layers.append(nn.Linear(width, int(sizes["classes"])))
    fields = (
        Field("pixels", (int(sizes["inputs"]),), "pixels"),
        Field("labels", (), "labels", int(sizes["classes"])),
    )
    return Task(nn.Sequential(*layers), fields, classification_loss, lr=0.01, momentum=0.9)


def small_vgg19(classes: int, head: int) -> nn.Module:
    """torchvision's VGG-19 convolutions with a ``head``-wide classifier on globally pooled features."""
    # deferred: +1.4 s CPU after torch, which only vgg19 and resnet50 need
    from torchvision.models.vgg import cfgs, make_layers

    model = nn.Sequential(
        make_layers(cfgs["E"]),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(512, head),
        nn.ReLU(inplace=True),
        nn.Dropout(),
        nn.Linear(head, head),
        nn.ReLU(inplace=True),
        nn.Dropout(),
        nn.Linear(head, classes),
    )
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0, 0.01)
            nn.init.zeros_(module.bias)
    return model


def build_vgg19(sizes: Sizes) -> Task:
    classes, head = int(sizes["classes"]), int(sizes["head"])
    if head == 4096:
        # deferred: +1.4 s CPU after torch, which only vgg19 and resnet50 need
        from torchvision.models import vgg19

        model = vgg19(weights=None, num_classes=classes)
    else:
        model = small_vgg19(classes, head)
    return Task(
        model, image_fields(sizes), classification_loss, lr=scaled_lr(0.01, sizes), momentum=0.9
    )


def build_resnet50(sizes: Sizes) -> Task:
    # deferred: +1.4 s CPU after torch, which only vgg19 and resnet50 need
    from torchvision.models import resnet50

    model = resnet50(weights=None, num_classes=int(sizes["classes"]))
    return Task(
        model, image_fields(sizes), classification_loss, lr=scaled_lr(0.1, sizes), momentum=0.9
    )


class WordLanguageModel(nn.Module):
    """Embedding, multi-layer LSTM and linear decoder; keeps its hidden state across steps (TBPTT)."""

    def __init__(self, vocab: int, emsize: int, nhid: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab, emsize)
        self.rnn = nn.LSTM(emsize, nhid, layers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, vocab)
        self.hidden: tuple[Tensor, Tensor] | None = None
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: Tensor) -> Tensor:
        hidden = None if self.hidden is None else (self.hidden[0].detach(), self.hidden[1].detach())
        output, self.hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        return self.decoder(self.drop(output))


def language_model_loss(model: nn.Module, batch: Sequence[Tensor]) -> Tensor:
    (windows,) = batch
    logits = model(windows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))


def build_lstm(sizes: Sizes) -> Task:
    vocab = int(sizes["vocab"])
    emsize, nhid, layers = int(sizes["emsize"]), int(sizes["nhid"]), int(sizes["layers"])
    model = WordLanguageModel(vocab, emsize, nhid, layers, float(sizes["dropout"]))
    fields = (Field("tokens", (int(sizes["bptt"]) + 1,), "tokens", vocab),)
    return Task(model, fields, language_model_loss, lr=20.0, clip=0.25, sequential=True)


class Reduction(nn.Module):
    """One learnable scalar fitted to the mean of the copied buffer: a step that is all copy."""

    def __init__(self) -> None:
        super().__init__()
        self.level = nn.Parameter(torch.zeros(()))

    def forward(self, buffer: Tensor) -> Tensor:
        return (buffer.mean() - self.level).square()


def reduction_loss(model: nn.Module, batch: Sequence[Tensor]) -> Tensor:
    (buffer,) = batch
    return model(buffer)


def build_h2d(sizes: Sizes) -> Task:
    floats = int(sizes["sample_kib"]) * 1024 // 4
    return Task(Reduction(), (Field("buffer", (floats,), "normal"),), reduction_loss, lr=0.1)


class MatmulStack(nn.Module):
    """``layers`` bias-free N x N linear maps regressing a fixed target from fixed inputs held on the device."""

    inputs: Tensor
    target: Tensor

    def __init__(self, rows: int, n: int, layers: int, generator: torch.Generator) -> None:
        super().__init__()
        self.layers = nn.Sequential(*(nn.Linear(n, n, bias=False) for _ in range(layers)))
        self.register_buffer("inputs", torch.randn(rows, n, generator=generator))
        self.register_buffer("target", torch.randn(rows, n, generator=generator))

    def forward(self) -> Tensor:
        return F.mse_loss(self.layers(self.inputs), self.target)


def matmul_loss(model: nn.Module, batch: Sequence[Tensor]) -> Tensor:
    return model()


def build_gemm(sizes: Sizes, rows: int, seed: int) -> Task:
    generator = torch.Generator().manual_seed(seed)
    model = MatmulStack(rows, int(sizes["n"]), int(sizes["layers"]), generator)
    return Task(model, (), matmul_loss, lr=0.01)


def build_task(name: str, sizes: Sizes, seed: int) -> Task:
    """The task of workload ``name`` with preset ``sizes`` (``sizes["batch"]`` is the batch used)."""
    if name == "fcn":
        return build_fcn(sizes)
    if name == "vgg19":
        return build_vgg19(sizes)
    if name == "resnet50":
        return build_resnet50(sizes)
    if name == "lstm":
        return build_lstm(sizes)
    if name == "h2d":
        return build_h2d(sizes)
    if name == "gemm":
        return build_gemm(sizes, int(sizes["batch"]), seed)
    raise ValueError(f"unknown workload {name!r}")
