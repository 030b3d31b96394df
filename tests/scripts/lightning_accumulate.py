"""A tiny Lightning model on the CPU with accumulate_grad_batches=4: 40 batches of 8, 10 optimizer steps (issue 43).
``--by-hand`` adds gpumon's callback itself."""

import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(16, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


callbacks = []
if "--by-hand" in sys.argv:
    from gpumon.callbacks.lightning import GpumonCallback

    callbacks.append(GpumonCallback())
data = TensorDataset(torch.randn(8 * 40, 16), torch.randn(8 * 40, 1))
trainer = L.Trainer(
    max_epochs=1,
    accumulate_grad_batches=4,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    callbacks=callbacks,
)
trainer.fit(Tiny(), DataLoader(data, batch_size=8))
print("optimizer steps", trainer.global_step, flush=True)
