#!/usr/bin/env python3
"""transformers' Trainer on a Llama (random weights from its configuration
class) at a 32000-word vocabulary, its loss computed by the model from the
labels, lengths changing every micro-batch, bfloat16 autocast (bf16=True)
and gradient accumulation, the Trainer's own AdamW: the loop most language
models are fine-tuned with. Contenders, each a Trainer in its own process,
taking turns update by update (a TrainerCallback waits for its turn):
- the plain model;
- transformers' gradient checkpointing (every layer);
- torch.utils.checkpoint on every second layer;
- transformers' gradient checkpointing with torchtune's chunked
  cross-entropy (CEWithChunkedOutputLoss, bench/peers_bench.py's copy of
  torchtune's file): the head applied to 8 chunks of the sequence, one
  chunk upcast at a time, never the whole logits;
- memtrain.Module at N% of the plain run's peak (bytes, measured first by a
  run of the plain model alone), its head and loss chunked where the budget
  needs it (chunked_loss=None), and with chunked_loss=True.
A peer has no budget: it fits a budget when its peak does. For each
contender: seconds per update (the median of the updates after the first),
its peak, its updates over its budget, whether it completed, and whether its
weights equal the plain run's (SHA-256 of the bytes).

    scripts/bench.sh trainer                     # or: PYTHONPATH=build/python python bench/trainer_bench.py
    scripts/bench.sh trainer --width 128 --layers 4 --longest 256 --section trainer_bench_small
    python bench/trainer_bench.py --device cuda --no-publish   # a phase of scripts/gpu-check.sh
"""

import argparse
import datetime
import json
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time

import torch

import memtrain
from side_by_side import Contender, abba_order, digest, publish


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--longest", type=int, default=512, help="longest row, in tokens; rows are 32..longest")
    p.add_argument("--batch", type=int, default=2, help="rows per micro-batch")
    p.add_argument("--accumulation", type=int, default=4)
    p.add_argument("--updates", type=int, default=6)
    p.add_argument("--budgets", default="100,70,50,30", help="percent of the plain run's peak")
    p.add_argument("--no-bf16", dest="bf16", action="store_false")
    p.add_argument("--device", default="cpu", help="cpu, or cuda: the model, the sample and the Trainer there")
    p.add_argument("--section", default="trainer_bench")
    p.add_argument("--no-publish", dest="publish", action="store_false")
    p.add_argument("--role", nargs="*", help=argparse.SUPPRESS)
    return p.parse_args()


def make_model(args):
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.width,
                                      intermediate_size=int(2.75 * args.width), num_hidden_layers=args.layers,
                                      num_attention_heads=max(1, args.width // 64),
                                      num_key_value_heads=max(1, args.width // 256),
                                      max_position_embeddings=max(512, args.longest))
    return transformers.LlamaForCausalLM(config)


class Rows(torch.utils.data.Dataset):
    """Token rows of 32..longest tokens, their labels the tokens."""

    def __init__(self, args):
        rng = random.Random(1)
        g = torch.Generator().manual_seed(1)
        count = args.updates * args.accumulation * args.batch
        self.rows = [torch.randint(0, args.vocab, (rng.randint(32, args.longest),), generator=g) for _ in range(count)]
        self.rows[1] = torch.randint(0, args.vocab, (args.longest,), generator=g)  # the longest, in the first update

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i]}


def collate(rows):
    length = max(len(r["input_ids"]) for r in rows)
    ids = torch.stack([torch.nn.functional.pad(r["input_ids"], (0, length - len(r["input_ids"]))) for r in rows])
    mask = torch.stack([torch.nn.functional.pad(torch.ones_like(r["input_ids"]), (0, length - len(r["input_ids"])))
                        for r in rows])
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def longest_batch(args):
    rows = Rows(args)
    row = max(rows.rows, key=len)
    return collate([{"input_ids": row}] * args.batch)


def checkpoint_every(model, k):
    """torch.utils.checkpoint (non-reentrant) around every k-th layer."""
    import torch.utils.checkpoint as checkpoint
    for i, layer in enumerate(model.model.layers):
        if i % k == 0:
            forward = layer.forward
            layer.forward = lambda *a, _f=forward, **kw: checkpoint.checkpoint(_f, *a, use_reentrant=False, **kw)


class TorchtuneLoss(torch.nn.Module):
    """A causal LM whose loss is torchtune's recipe: the head applied to
    chunks of the shifted sequence, its chunked cross-entropy. The Trainer
    sees a forward of input_ids, attention_mask and labels."""

    def __init__(self, lm):
        super().__init__()
        from peers_bench import torchtune_chunked_loss
        self.lm, self.loss = lm, torchtune_chunked_loss()

    def forward(self, input_ids, attention_mask, labels):
        hidden = self.lm.model(input_ids=input_ids, attention_mask=attention_mask,
                               use_cache=False).last_hidden_state[:, :-1]
        weight = self.lm.lm_head.weight
        chunks = [torch.nn.functional.linear(h, weight) for h in hidden.chunk(self.loss.num_output_chunks, dim=1)]
        return {"loss": self.loss(chunks, labels[:, 1:])}


def prepared(args, role):
    """The model a role trains, and what it records beside the steps."""
    kind = role[0]
    model = make_model(args).to(args.device)  # before wrapping: memtrain measures the model where it trains
    if kind == "every":
        checkpoint_every(model, int(role[1]))
    if kind == "torchtune-checkpointing":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model = TorchtuneLoss(model)
    if kind == "memtrain":
        chunked = {"auto": None, "chunked": True}[role[2]]
        sample = {k: v.to(args.device) for k, v in longest_batch(args).items()}
        # compute_loss returns the loss alone: the output goes before the backward.
        model = memtrain.Module(model, budget=int(role[1]), sample=sample, chunked_loss=chunked, keeps_output=False)
    return model


class Turns:
    """A TrainerCallback that waits for "step i" before each update and
    answers "done" after it, recording its seconds and peak."""

    def __init__(self, budget, device):
        import transformers

        turns = self

        def synchronize():
            if device.startswith("cuda"):
                torch.cuda.synchronize()

        class Callback(transformers.TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                line = sys.stdin.readline().split()
                if not line or line[0] != "step":
                    raise RuntimeError(f"expected a step, got {line}")
                synchronize()
                memtrain.reset_peak(device)
                turns.t0 = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                synchronize()
                turns.seconds.append(time.perf_counter() - turns.t0)
                # memtrain's count: it resets the caching allocator's peak as it measures operations.
                turns.peaks.append(memtrain.memory_stats(device)["peak_bytes"])
                print("done", flush=True)

        self.callback = Callback()
        self.budget = budget
        self.seconds, self.peaks, self.t0 = [], [], 0.0


def run_role(args):
    import transformers
    role = args.role
    budget = int(role[1]) if role[0] == "memtrain" else None
    error = None
    turns = Turns(budget, args.device)
    try:
        model = prepared(args, role)
    except memtrain.Error as e:
        print("idle", flush=True)
        print(json.dumps({"refused": str(e)}), flush=True)
        return
    training = transformers.TrainingArguments(
        output_dir=tempfile.mkdtemp(), use_cpu=args.device == "cpu", per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=args.accumulation, max_steps=args.updates, learning_rate=1e-4, report_to=[],
        save_strategy="no", logging_strategy="no", seed=7, bf16=args.bf16, dataloader_num_workers=0,
        disable_tqdm=True, gradient_checkpointing=role[0] == "hf-checkpointing",
        gradient_checkpointing_kwargs={"use_reentrant": False})
    trainer = transformers.Trainer(model=model, args=training, train_dataset=Rows(args), data_collator=collate,
                                   callbacks=[turns.callback])
    print("ready", flush=True)
    try:
        trainer.train()
    except Exception as e:  # recorded, not raised: the bench says what failed and where
        error = f"{type(e).__name__} at update {len(turns.seconds) + 1}: {str(e)[:160]}"
        print("done", flush=True)  # answers the turn it failed in
        for line in sys.stdin:  # the rest of the turns
            if line.split()[0] == "end":
                break
            print("done", flush=True)
    else:
        sys.stdin.readline()  # "end"
    print(json.dumps({"seconds": turns.seconds, "peaks": turns.peaks, "budget": budget, "error": error,
                      "digest": digest(p for p in model.parameters()) if error is None else None}), flush=True)


def role_command(args, *role):
    flags = ["--width", args.width, "--layers", args.layers, "--vocab", args.vocab, "--longest", args.longest,
             "--batch", args.batch, "--accumulation", args.accumulation, "--updates", args.updates,
             "--device", args.device]
    if not args.bf16:
        flags.append("--no-bf16")
    return [sys.executable, __file__, *map(str, flags), "--role", *role]


def run_contenders(args, roles):
    contenders = []
    for role in roles:
        c = Contender(" ".join(role), role_command(args, *role))
        c.idle = c.expect("ready", "idle") == "idle"
        contenders.append(c)
    for i in range(args.updates):
        for c in abba_order([c for c in contenders if not c.idle], i):
            c.step(i)
    return {c.name: c.record(send_end=not c.idle) for c in contenders}


def summary(name, record, plain_digest):
    if "refused" in record:
        return f"| {name} | refused at construction: {record['refused'][:90]} | | | | |"
    seconds = record["seconds"][1:] or record["seconds"]
    peak = max(record["peaks"]) if record["peaks"] else 0
    budget = record["budget"]
    over = sum(p > budget for p in record["peaks"]) if budget else "-"
    done = "yes" if record["error"] is None else f"no: {record['error']}"
    exact = "-" if record["digest"] is None else ("yes" if record["digest"] == plain_digest else "no")
    return (f"| {name} | {statistics.median(seconds):.3f} | {peak / 2**20:.1f} | {over} | {done} | {exact} |"
            if seconds else f"| {name} | - | - | {over} | {done} | {exact} |")


def main():
    args = parse_args()
    if args.role:
        return run_role(args)
    torch.set_num_threads(torch.get_num_threads())
    budgets = [int(b) for b in args.budgets.split(",")]
    plain = run_contenders(args, [("plain",)])["plain"]
    reference = max(plain["peaks"])
    roles = [("plain",), ("hf-checkpointing",), ("every", "2"), ("torchtune-checkpointing",)]
    for b in budgets:
        for mode in ("auto", "chunked"):
            roles.append(("memtrain", str(reference * b // 100), mode, f"{b}%"))
    records = run_contenders(args, [r[:3] for r in roles])
    lines = [f"Command: `{shlex.join(['python', 'bench/trainer_bench.py', *sys.argv[1:]])}`; "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
             f"{', ' + torch.cuda.get_device_name() if args.device.startswith('cuda') else ''}, "
             f"torch {torch.__version__}, "
             f"{datetime.date.today()}.",
             f"Llama {args.layers} layers, width {args.width}, vocabulary {args.vocab}; batches of {args.batch} rows "
             f"of 32-{args.longest} tokens, {args.accumulation} accumulated per update, "
             f"{'bf16 autocast' if args.bf16 else 'fp32'}; {args.updates} updates. The plain run alone peaked "
             f"{reference / 2**20:.1f} MiB; memtrain's budgets are shares of it.", "",
             "| contender | s/update | peak MiB | updates over budget | completed | weights = plain's |",
             "|---|---|---|---|---|---|"]
    for role in roles:
        name = " ".join(role[:1] + role[3:] + role[2:3]) if role[0] == "memtrain" else " ".join(role)
        lines.append(summary(name, records[" ".join(role[:3])], records["plain"]["digest"]))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.publish:
        publish(args.section, text, os.path.join(os.path.dirname(__file__), "..", "docs", "BENCHMARKS.md"))


if __name__ == "__main__":
    main()
