"""A block's parameters are what it holds and reads when a step runs, not
what it held when the model was wrapped: an adapter added after wrapping,
a low-rank adapter that replaces a layer, a gain its parent owns and every
block reads, and the tensors torch.func.functional_call puts in its place
all get the plain model's gradients, bit for bit, whether memtrain keeps
the block or recomputes it. A tensor a block reads that memtrain cannot
hand a gradient to is refused by name, never dropped."""

import gc

import pytest
import torch
import torch.nn.functional as F

import memtrain
from exact import digest
from models import VOCAB, SharedGainNet as Model, add_adapters, add_low_rank



def batches():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, VOCAB, (2, length), generator=g) for length in (33, 49, 41, 57, 49)]


def loss_of(logits, ids):
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


def train(model, change=None, at=0):
    """SGD over the batches; `change` applied to the model before step `at`.
    Returns each step's gradients' digests, in named_parameters order."""
    torch.manual_seed(3)
    steps = []
    for k, ids in enumerate(batches()):
        if change is not None and k == at:
            change(model)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        loss_of(model(ids), ids).backward()
        steps.append([(n, digest(p.grad)) for n, p in model.named_parameters()])
        opt.step()
        opt.zero_grad(set_to_none=True)
    return steps


def wrapped(model, collect_steps):
    """At "100%": with no collection steps, every block kept; with more
    collection steps than the test runs, every block recomputed."""
    return memtrain.Module(model, budget="100%", sample=batches()[3], collect_steps=collect_steps)


KEPT_OR_RECOMPUTED = pytest.mark.parametrize("collect_steps", [0, 10], ids=["kept", "recomputed"])


@KEPT_OR_RECOMPUTED
@pytest.mark.parametrize("change, at", [(None, 0), (add_adapters, 0), (add_adapters, 3), (add_low_rank, 0),
                                        (add_low_rank, 3)],
                         ids=["parents-gain", "adapters", "adapters-later", "low-rank", "low-rank-later"])
def test_parameters_added_after_wrapping_and_read_from_the_parent_get_the_plain_gradients(change, at, collect_steps):
    plain = train(Model(), change, at)
    gc.collect()
    model = Model()
    m = wrapped(model, collect_steps)
    got = train(m, change, at)
    assert (m.last_step["plan"] == "collect") == (collect_steps > 0)
    assert got == plain
    assert all(d is not None for n, d in got[-1] if n.startswith("gain.") or "adapter" in n or ".up." in n)


@KEPT_OR_RECOMPUTED
def test_functional_call_gets_the_gradients_of_the_tensors_it_was_given(collect_steps):
    """torch.func.functional_call on the Module with leaves of the caller's
    own, and with tensors computed from them (a hypernetwork's): their
    gradients are the plain model's, and the Module's own parameters get none."""
    def grads(model, derived):
        torch.manual_seed(3)
        ids = batches()[1]
        base = {n: p.detach().clone().requires_grad_(True) for n, p in model.named_parameters()}
        given = {n: t * 1.0 for n, t in base.items()} if derived else base
        loss_of(torch.func.functional_call(model, given, (ids,)), ids).backward()
        assert all(p.grad is None for p in model.parameters())
        return [(n, digest(t.grad)) for n, t in base.items()]

    for derived in (False, True):
        plain = grads(Model(), derived)
        gc.collect()
        m = wrapped(Model(), collect_steps)
        m.budget = 2 * m.budget_bytes  # room for the test's copies of the parameters
        got = grads(m, derived)
        assert got == plain, derived
        assert all(d is not None for _, d in got)
        del m
        gc.collect()


def test_a_tensor_read_by_attribute_that_needs_a_gradient_is_refused_by_name():
    """A block reading a tensor computed before it ran from parameters
    (stored on the block, not passed): memtrain cannot hand that gradient
    on, and says so rather than dropping it."""
    model = Model()
    m = wrapped(model, 0)
    ids = batches()[0]
    for block in model.blocks:
        block.__dict__["gain"] = type("Scaled", (), {"weight": model.gain.weight * 2})()
    with pytest.raises(memtrain.UsageError,
                       match=r"block \d \(GainBlock\)'s forward read a tensor that needs a gradient"):
        loss_of(m(ids), ids).backward()
