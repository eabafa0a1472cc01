"""The head and the loss without their logits: memtrain.linear_cross_entropy
against F.cross_entropy(F.linear(...)), and under a Module's budget."""

import pytest
import torch
import torch.nn.functional as F

import memtrain
from models import NanoGPT

# Measured: at most 6.2e-7 of the largest gradient (float32, 1024 tokens, a
# 32000-word vocabulary, chunks of 100 and 256 tokens); the bound leaves room
# for other machines' summation orders.
TOLERANCE = 1e-5


def head_inputs(tokens=600, width=64, vocab=32000, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(tokens, width, generator=g)
    weight = torch.randn(vocab, width, generator=g) * 0.05
    bias = torch.randn(vocab, generator=g) * 0.01
    targets = torch.randint(0, vocab, (tokens,), generator=g)
    targets[::7] = -100  # ignored tokens count nowhere
    return hidden, weight, bias, targets


def loss_and_grads(fn, hidden, weight, bias, targets):
    h, w, b = (t.clone().requires_grad_() for t in (hidden, weight, bias))
    memtrain.reset_peak()
    before = memtrain.memory_stats()["live_bytes"]
    loss = fn(h, w, b, targets)
    loss.backward()
    return loss.detach(), h.grad, w.grad, b.grad, memtrain.memory_stats()["peak_bytes"] - before


def plain(h, w, b, t, reduction="mean"):
    return F.cross_entropy(F.linear(h, w, b), t, reduction=reduction)


def relative(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def test_one_chunk_is_the_plain_computation_bit_for_bit():
    inputs = head_inputs()
    want = loss_and_grads(plain, *inputs)
    got = loss_and_grads(lambda h, w, b, t: memtrain.linear_cross_entropy(h, w, t, b), *inputs)
    for a, b in zip(got[:4], want[:4]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("chunk", [64, 256])
def test_chunks_match_the_plain_loss_and_hold_a_fraction_of_its_memory(chunk, reduction):
    inputs = head_inputs()
    want = loss_and_grads(lambda *a: plain(*a, reduction=reduction), *inputs)
    got = loss_and_grads(
        lambda h, w, b, t: memtrain.linear_cross_entropy(h, w, t, b, reduction=reduction, chunk_tokens=chunk),
        *inputs)
    for name, a, b in zip(["loss", "hidden", "weight", "bias"], got[:4], want[:4]):
        assert relative(a, b) <= TOLERANCE, name
    # The plain head holds logits, log-probabilities and both their gradients (600 x 32000 floats each).
    assert got[4] < want[4] / 3, (got[4], want[4])


def test_bad_arguments_are_named():
    h, w, _, t = head_inputs(tokens=8)
    with pytest.raises(memtrain.UsageError, match="hidden"):
        memtrain.linear_cross_entropy(h, w.t(), t)
    with pytest.raises(memtrain.UsageError, match="targets"):
        memtrain.linear_cross_entropy(h, w, t[:4])
    with pytest.raises(memtrain.UsageError, match="chunk_tokens"):
        memtrain.linear_cross_entropy(h, w, t, chunk_tokens=0)
    with pytest.raises(memtrain.UsageError, match="reduction"):
        memtrain.linear_cross_entropy(h, w, t, reduction="none")


def test_a_module_trains_below_what_the_plain_loss_needs():
    """Half the peak of the plain model with the plain loss: the blocks alone
    cannot get there (the logits and their gradients are most of it); with the
    chunked head, every step stays within it and the losses follow the plain
    model's."""
    g = torch.Generator().manual_seed(3)
    data = [torch.randint(0, 32000, (4, n + 1), generator=g) for n in (96, 64, 80, 40, 96, 72, 56, 88)]
    model = NanoGPT()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    memtrain.reset_peak()
    plain_losses = []
    torch.manual_seed(1)
    for ids in data:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        opt.step()
        plain_losses.append(loss.item())
    budget = memtrain.memory_stats()["peak_bytes"] // 2
    del model, opt, loss

    model = NanoGPT()
    m = memtrain.Module(model, budget=budget, blocks=model.blocks, sample=(data[0][:, :-1], False, True))
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    torch.manual_seed(1)
    for step, ids in enumerate(data):
        opt.zero_grad(set_to_none=True)
        memtrain.reset_peak()
        hidden = m(ids[:, :-1], hidden=True)
        loss = m.linear_cross_entropy(hidden, model.head.weight, ids[:, 1:])
        loss.backward()
        opt.step()
        assert memtrain.memory_stats()["peak_bytes"] <= budget, f"step {step}"
        assert loss.item() == pytest.approx(plain_losses[step], rel=1e-4)


@pytest.mark.parametrize("free_share", [0.3, 0.6])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtypes", ["fp32", "bf16-autocast", "bf16-model"])
def test_the_chunk_chosen_for_free_bytes_holds_no_more_than_them(dtypes, with_bias, free_share):
    """A chunk is chosen from what is free; the computation also holds the
    weight's float32 gradient and, under autocast, the weight's cast, whatever
    the chunk. The forward and backward together stay within the free bytes."""
    from memtrain._linear_cross_entropy import chunk_tokens_for
    dtype = torch.bfloat16 if dtypes == "bf16-model" else torch.float32
    hidden, weight, bias, targets = head_inputs(tokens=512)
    h, w = (t.to(dtype).requires_grad_() for t in (hidden, weight))
    b = bias.to(dtype).requires_grad_() if with_bias else None
    # A share of the plain head's logits, at 8 bytes each.
    free = int(free_share * 512 * 32000 * 8)
    # The user's autocast caches the weight's cast for the whole forward.
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtypes == "bf16-autocast"):
        chunk = chunk_tokens_for(512, h, w, b, free)
        assert 1 < chunk < 512, chunk  # chunks, each of more than one token
        memtrain.reset_peak()
        before = memtrain.memory_stats()["live_bytes"]
        loss = memtrain.linear_cross_entropy(h, w, targets, b, chunk_tokens=chunk)
    loss.backward()
    held = memtrain.memory_stats()["peak_bytes"] - before
    assert held <= free, (chunk, held, free)
