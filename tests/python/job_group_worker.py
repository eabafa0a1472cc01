"""One process of a job group test (test_job_group.py): trains a 32000-word
language model for a few steps of changing lengths with AdamW and the loss
in the loop, as memtrain.Module(share=NAME) or as the plain model, printing
"step K" as each step ends and writing its losses and weights as JSON.
share-then-wait shares too, and after its second step waits for a second
member to join the group, so that one joins a group already training.

    python job_group_worker.py plain|share|share-then-wait NAME SEED OUT_JSON
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


def main(mode, name, seed, out):
    torch.set_num_threads(1)
    model = NanoGPT(vocab=32000, width=64, heads=4, layers=3, seed=seed)
    g = torch.Generator().manual_seed(100 + seed)
    batches = [torch.randint(0, 32000, (2, t + 1), generator=g) for t in LENGTHS]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if mode != "plain":
        net = memtrain.Module(model, share=name, sample=torch.zeros(2, max(LENGTHS), dtype=torch.long),
                              optimizer=opt)
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
