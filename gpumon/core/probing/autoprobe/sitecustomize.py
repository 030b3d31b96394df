"""gpumon auto-probe: counts optimizer steps of an unmodified PyTorch script.

``gpumon run --cmd`` and ``gpumon wrap`` (``GPUMON_AUTOPROBE=1``: the probe's rendezvous) put this
directory first on PYTHONPATH. When the script
imports ``torch.optim``, a global optimizer step post-hook is registered that
calls ``gpumon.core.probing.probe.step()`` for the first optimizer that steps. Any other
``sitecustomize`` later on ``sys.path`` is still run. ``torch.autograd.backward`` is wrapped to count backward
passes: the first says training began, and several per optimizer step are its micro-batches. A Lightning or
Hugging Face ``Trainer`` gets gpumon's callback (gpumon/callbacks/), which then reports the steps with their
samples and tokens. See docs/probe.md.
"""

import importlib.abc
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = "torch.optim.optimizer"


def _run_next_sitecustomize() -> None:
    for entry in sys.path:
        directory = os.path.abspath(entry or os.curdir)
        candidate = os.path.join(directory, "sitecustomize.py")
        if directory != _HERE and os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_gpumon_next_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def _install_step_hook(optimizer_module) -> None:
    # deferred: +0.013 s CPU on every Python a probed command starts
    from gpumon.core.probing import probe

    counted: list[int] = []
    passes = _count_backward(probe)

    def on_step(optimizer, args, kwargs) -> None:
        if not counted:
            counted.append(id(optimizer))
            probe.meta(counts="optimizer steps", **_device_of(optimizer))
        if id(optimizer) == counted[0]:
            passes.stepped()
            if probe.steps_reported_by() is None:  # else a framework callback reports them
                probe.step()

    optimizer_module.register_optimizer_step_post_hook(on_step)


def _device_of(optimizer) -> dict:
    """``{"device": "cpu"}`` (or ``cuda:0``...): where the optimizer's first parameter lives, as run.json's meta says
    it (on the CPU the jobs share cores, not GPU time slices); {} when it has none."""
    for group in getattr(optimizer, "param_groups", ()):
        for param in group.get("params", ()):
            device = getattr(param, "device", None)
            return {"device": str(device)} if device is not None else {}
    return {}


class _BackwardPasses:
    """Backward passes (micro-batches) between optimizer steps: the first says training began (the no-steps
    notice counts CPU from then, not from an import), and a steady count above one is the step's micro-batches
    (gradient accumulation), said once and again when it changes."""

    def __init__(self, probe) -> None:
        self.probe = probe
        self.passes = 0
        self.began = False
        self.per_step = 1

    def backward(self) -> None:
        if not self.began:
            self.began = True
            self.probe.meta(training=True)
        self.passes += 1

    def stepped(self) -> None:
        if self.passes and self.passes != self.per_step:
            self.per_step = self.passes
            self.probe.meta(micro_batches=self.passes)
        self.passes = 0


def _count_backward(probe) -> _BackwardPasses:
    """Wraps ``torch.autograd.backward`` (what ``Tensor.backward`` calls) to count backward passes."""
    passes = _BackwardPasses(probe)
    autograd = sys.modules.get("torch.autograd")
    original = getattr(autograd, "backward", None)
    if original is None:
        return passes

    def backward(*args, **kwargs):
        result = original(*args, **kwargs)
        passes.backward()
        return result

    backward.__wrapped__ = original  # type: ignore[attr-defined]
    backward.__doc__ = original.__doc__
    autograd.backward = backward  # type: ignore[union-attr]
    return passes


# Trainers whose callback (gpumon/callbacks/) the auto-probe adds: module of the Trainer class -> callback's module
_TRAINERS = {
    "lightning.pytorch.trainer.trainer": "gpumon.callbacks.lightning",
    "pytorch_lightning.trainer.trainer": "gpumon.callbacks.pytorch_lightning",
    "transformers.trainer": "gpumon.callbacks.huggingface",
}


def _install_trainer_callback(module) -> None:
    """Every ``Trainer`` made from now on gets gpumon's callback (unless it has one): optimizer steps, micro-batches,
    samples and tokens with no change to the script."""
    trainer = getattr(module, "Trainer", None)
    callbacks_module = _TRAINERS[module.__name__]
    if trainer is None:
        return
    original = trainer.__init__

    def __init__(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        try:
            callback = importlib.import_module(callbacks_module).GpumonCallback
            handler = getattr(self, "callback_handler", None)  # transformers
            present = handler.callbacks if handler is not None else self.callbacks
            if any(type(c).__module__.startswith("gpumon.callbacks.") for c in present):
                return
            if handler is not None:
                self.add_callback(callback())
            else:
                self.callbacks.append(callback())
        except Exception:  # noqa: BLE001 - the auto-probe must never break the trainer: the optimizer hook counts
            return

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    trainer.__init__ = __init__


class _AfterImport(importlib.abc.MetaPathFinder):
    """Lets a module load normally, then calls ``then`` on it (once: the finder leaves ``sys.meta_path``)."""

    def __init__(self, target: str, then) -> None:
        self.target = target
        self.then = then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module
        then = self.then

        def exec_module(module) -> None:
            original(module)
            then(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]  # the hook: wrapping the loader's method is the point
        return spec


if os.environ.get("GPUMON_PROBE_FD") or os.environ.get("GPUMON_AUTOPROBE"):
    sys.meta_path.insert(0, _AfterImport(_TARGET, _install_step_hook))
    for _module in _TRAINERS:
        sys.meta_path.insert(0, _AfterImport(_module, _install_trainer_callback))
_run_next_sitecustomize()
