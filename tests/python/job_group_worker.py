"""One process of a job group test (test_job_group.py): trains a 32000-word
language model for a few steps of changing lengths with AdamW and the loss
in the loop, as memtrain.Module(share=NAME) or as the plain model, printing
"step K" as each step ends and writing its losses and weights as JSON.
share-then-wait shares too, and after its second step waits for a second
member to join the group, so that one joins a group already training.

share-host shares with the blocks' weights in host memory (weights="host").
share-llm is transformers' GPT-2 in an LLM loop (llm_loop()).

    python job_group_worker.py plain|share|share-host|share-then-wait|share-llm NAME SEED OUT_JSON
"""

import hashlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import memtrain  # noqa: E402
from models import NanoGPT  # noqa: E402

LENGTHS = [48, 32, 64, 40, 56, 24]


def wait_for_a_second_member(group, timeout=120):
    deadline = time.monotonic() + timeout
    while len(group.state()["members"]) < 2:
        if time.monotonic() > deadline:
            sys.exit(f"no second member joined group {group.name} in {timeout} s")
        time.sleep(0.05)


def llm_loop(name, seed, out):
    """transformers' GPT-2 at 32000 words in the loop LLM users run: the
    loss from labels, bfloat16 autocast, 2 accumulated micro-batches of
    changing lengths, AdamW. Two such jobs in a group at 80% lease each
    other short: one's head turns to chunks mid-training (its steps
    planned afresh while it leases). Records the steps' losses, whether a
    step ran chunked, and whether each step's peak stayed within its lease."""
    import transformers

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32000, n_embd=128, n_layer=4, n_head=4, n_positions=256)
    model = transformers.GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(1234 + seed)
    steps = [[torch.randint(0, 32000, (2, int(torch.randint(20, 121, (1,), generator=g))), generator=g)
              for _ in range(2)] for _ in range(12)]
    sample = torch.randint(0, 32000, (2, 120), generator=torch.Generator().manual_seed(7))
    net = memtrain.Module(model, share=name, sample={"input_ids": sample, "labels": sample})
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    losses, chunked, within = [], [], []
    for k, micro in enumerate(steps):
        for ids in micro:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = net(input_ids=ids, labels=ids, use_cache=False).loss / 2
            loss.backward()
            losses.append(loss.item())
            chunked.append(bool(net.last_step["chunked_loss"]))
            within.append(net.last_step["peak_bytes"] <= net.last_step["budget_bytes"])
            del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {k + 1}", flush=True)
    with open(out, "w") as f:
        json.dump({"losses": losses, "chunked": chunked, "within": within}, f)


def main(mode, name, seed, out):
    if mode == "share-llm":
        return llm_loop(name, seed, out)
    torch.set_num_threads(1)
    model = NanoGPT(vocab=32000, width=64, heads=4, layers=3, seed=seed)
    g = torch.Generator().manual_seed(100 + seed)
    batches = [torch.randint(0, 32000, (2, t + 1), generator=g) for t in LENGTHS]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if mode != "plain":
        net = memtrain.Module(model, share=name, sample=torch.zeros(2, max(LENGTHS), dtype=torch.long),
                              optimizer=opt, weights="host" if mode == "share-host" else "device")
    else:
        net = model
    torch.manual_seed(seed)  # the dropout's draws, the same in both modes
    losses, budgets = [], []
    for k, ids in enumerate(batches):
        logits = net(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item().hex())
        if mode != "plain":
            budgets.append(net.last_step["budget_bytes"])
        print(f"step {k + 1}", flush=True)
        if mode == "share-then-wait" and k == 1:
            wait_for_a_second_member(net.job_group)
    weights = hashlib.sha256(b"".join(p.detach().reshape(-1).view(torch.uint8).numpy().tobytes()
                                      for p in model.parameters())).hexdigest()
    with open(out, "w") as f:
        json.dump({"losses": losses, "weights": weights, "budgets": budgets}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
