"""transformers' Trainer on token rows of changing lengths, the loop the
Trainer tests run: 2 rows a micro-batch, 2 micro-batches an update, 3
updates, its own AdamW, labels for the loss, on the CPU."""

import random
import tempfile

import torch
import torch.nn.functional as F

VOCAB = 32000


def llama(seed=0):
    """transformers' Llama at VOCAB words, 3 layers of width 64."""
    import transformers  # the tests that make it skip without it

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(config)


class Texts(torch.utils.data.Dataset):
    """Token rows of lengths 16-64, with a column the model does not take."""

    def __init__(self, count=16, seed=0):
        rng = random.Random(seed)
        g = torch.Generator().manual_seed(seed)
        self.rows = [torch.randint(0, VOCAB, (rng.randint(16, 64),), generator=g) for _ in range(count)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids = self.rows[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone(), "source": i}


def collate(rows):
    length = max(len(r["input_ids"]) for r in rows)
    batch = {k: torch.stack([F.pad(r[k], (0, length - len(r[k])), value=pad) for r in rows])
             for k, pad in (("input_ids", 0), ("attention_mask", 0), ("labels", -100))}
    if "source" in rows[0]:
        batch["source"] = torch.tensor([r["source"] for r in rows])
    return batch


def trainer_run(model, bf16, callbacks=None, prepare=lambda trainer: trainer, optimizers=(None, None)):
    """The Trainer's losses, the weights it left, and the Trainer."""
    import transformers  # the tests that run it skip without it

    args = transformers.TrainingArguments(
        output_dir=tempfile.mkdtemp(), use_cpu=True, per_device_train_batch_size=2, gradient_accumulation_steps=2,
        max_steps=3, learning_rate=1e-3, report_to=[], save_strategy="no", logging_steps=1, seed=7, bf16=bf16,
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = prepare(transformers.Trainer(model=model, args=args, train_dataset=Texts(), data_collator=collate,
                                           callbacks=callbacks, optimizers=optimizers))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return losses, [p.detach().clone() for p in model.parameters()], trainer


def trainer_sample():
    ds = Texts()
    row = ds[max(range(len(ds)), key=lambda i: len(ds.rows[i]))]
    return collate([{k: v for k, v in row.items() if k != "source"}] * 2)


def update_peaks(peaks, beside=None):
    """A TrainerCallback appending each update's peak on the counted device
    to `peaks` (with beside()'s value, where given, as a pair)."""
    import transformers

    import memtrain

    class UpdatePeaks(transformers.TrainerCallback):
        def on_step_begin(self, *args, **kwargs):
            memtrain.reset_peak()

        def on_step_end(self, *args, **kwargs):
            peak = memtrain.memory_stats()["peak_bytes"]
            peaks.append(peak if beside is None else (peak, beside()))

    return UpdatePeaks()
