"""A tiny Hugging Face Trainer (a BERT built from a config, no download) on the CPU with gradient_accumulation_steps=4:
160 samples in micro-batches of 4, 10 optimizer steps of 16 samples and 192 tokens (issue 43). ``--by-hand`` adds
gpumon's callback itself. argv[1]: the Trainer's output folder."""

import os
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

os.environ.setdefault("HF_HUB_OFFLINE", "1")
config = BertConfig(
    vocab_size=64,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=32,
)
model = BertForSequenceClassification(config)
torch.manual_seed(0)
data = [
    {
        "input_ids": torch.randint(0, 64, (12,)),
        "attention_mask": torch.ones(12, dtype=torch.long),
        "labels": torch.tensor(i % 2),
    }
    for i in range(4 * 4 * 10)
]
callbacks = []
if "--by-hand" in sys.argv:
    from gpumon.callbacks.huggingface import GpumonCallback

    callbacks.append(GpumonCallback())
args = TrainingArguments(
    output_dir=sys.argv[1],
    per_device_train_batch_size=4,
    gradient_accumulation_steps=4,
    num_train_epochs=1,
    report_to=[],
    save_strategy="no",
    logging_strategy="no",
    use_cpu=True,
    disable_tqdm=True,
    include_num_input_tokens_seen=True,
)
trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
trainer.train()
print("optimizer steps", trainer.state.global_step, flush=True)
