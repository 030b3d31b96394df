"""Framework callbacks that report a trainer's optimizer steps, micro-batches, samples and tokens to gpumon's probe
(nvitop's layout: ``gpumon.callbacks.lightning``, ``gpumon.callbacks.huggingface``). They run in the training
process, like ``gpumon.probe``; the auto-probe adds them to a Lightning or Hugging Face ``Trainer`` by itself
(``gpumon run --cmd``, ``gpumon wrap``), or add one by hand::

    from gpumon.callbacks.lightning import GpumonCallback
    trainer = lightning.Trainer(callbacks=[GpumonCallback()])

See docs/probe.md#framework-callbacks."""
