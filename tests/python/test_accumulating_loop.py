"""A loop that accumulates micro-batches of lengths changing every call,
the loss computed by the loop, Adam given: the first micro-batch of each
update begins without gradients and the later ones with them, so the code
after the blocks holds more in the later ones. Whichever sizes memtrain has
seen of each, and whether the loop keeps its output through the backward
or lets it go (as keeps_output says), every step of a budget at or above
the least stated at construction runs within it: none is refused later,
and memtrain's budget error never reaches the loop's own loss or
backward. The weights equal the plain loop's, bit for bit."""

import gc
import random
import warnings

import pytest
import torch
import torch.nn.functional as F

import memtrain
from exact import digest
from models import NanoGPT

VOCAB = 8000
UPDATES = 3
MICRO = 4


def gpt():
    return NanoGPT(vocab=VOCAB, width=64, heads=4, layers=4, positions=128)


def updates():
    rng = random.Random(1)
    g = torch.Generator().manual_seed(1)
    lengths = [96] + [rng.randint(24, 96) for _ in range(UPDATES * MICRO - 1)]
    ids = [torch.randint(0, VOCAB, (2, n + 1), generator=g) for n in lengths]
    return [ids[i:i + MICRO] for i in range(0, len(ids), MICRO)]


def train(model, data, opt, holds_output, budget_of=None, start=0):
    """Returns the weights; with budget_of, checks every update's peak.
    `start`: the number of the data's first update in the loop."""
    for k, update in enumerate(data, start):
        memtrain.reset_peak()
        for step, ids in enumerate(update):
            torch.manual_seed(100 * k + step)  # dropout: the same draws as the plain loop's
            if holds_output:
                logits = model(ids[:, :-1])
                loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()) / len(update)
                loss.backward()
                del logits
            else:
                (F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()) / len(update)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if budget_of is not None:
            peak = memtrain.memory_stats()["peak_bytes"]
            assert peak <= budget_of(), f"update {k}: peak {peak} bytes over the budget {budget_of()}"
    return [digest(p) for p in model.parameters()]


_plain = {}


def plain(holds_output):
    if holds_output not in _plain:
        model = gpt()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        _plain[holds_output] = train(model, updates(), opt, holds_output)
        del model, opt
        gc.collect()
    return _plain[holds_output]


def wrap(budget, planner, keeps_output=True):
    model = gpt()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sample = updates()[0][0][:, :-1]
    return memtrain.Module(model, budget=budget, planner=planner, sample=sample, optimizer=opt,
                           autocast=False, keeps_output=keeps_output), opt


def least(planner, keeps_output=True):
    model = gpt()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return memtrain.least_budget(model, updates()[0][0][:, :-1], opt, planner=planner, autocast=False,
                                 keeps_output=keeps_output)


@pytest.mark.parametrize("holds_output,keeps_output", [(False, True), (True, True), (False, False)],
                         ids=["output-dropped", "output-held", "output-dropped-as-said"])
@pytest.mark.parametrize("planner", ["mimose", "joint"])
def test_an_accumulating_loop_never_sees_memtrains_budget_error(planner, holds_output, keeps_output):
    weights = plain(holds_output)
    lowest = least(planner, keeps_output)
    for share in (1.0, 1.02, 1.05, 1.1):
        m, opt = wrap(int(lowest * share), planner, keeps_output)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the loop does as keeps_output says: nothing to warn of
            trained = train(m, updates(), opt, holds_output, budget_of=lambda: m.budget_bytes)
        assert trained == weights, f"{share}x the least: the weights differ from the plain loop's"
        del m, opt
        gc.collect()


def test_a_loop_that_lets_its_output_go_says_so_for_a_lower_least():
    """keeps_output=False counts the output's bytes (the logits, float32)
    less, at most; the least for a loop that keeps it names the option."""
    with pytest.raises(memtrain.Infeasible, match="keeps_output=False") as kept:
        wrap(1, "mimose")
    let_go = least("mimose", keeps_output=False)
    sample = updates()[0][0][:, :-1]
    logits = sample.numel() * VOCAB * 4
    assert kept.value.min_bytes - logits <= let_go < kept.value.min_bytes


def test_a_loop_said_to_let_its_output_go_that_keeps_it_is_warned_and_planned_so():
    """At a budget the keeping loop's least fits, keeps_output=False and a
    loop that keeps the output: warned at its first backward, and every
    step within the budget, bit-equal to the plain loop."""
    weights = plain(True)
    m, opt = wrap(least("mimose"), "mimose", keeps_output=False)
    with pytest.warns(UserWarning, match="keeps the model's output alive through its backward") as seen:
        trained = train(m, updates(), opt, True, budget_of=lambda: m.budget_bytes)
    assert trained == weights
    # Shown at the loop's own line (its loss.backward()), not inside torch.
    assert [w.filename for w in seen if "keeps_output" in str(w.message)] == [__file__]


def test_a_step_refused_holds_nothing_while_the_loop_handles_it():
    """A micro-step refused before it runs (memtrain.Infeasible): inside
    the loop's `except`, the error holds none of the step's tensors, so a
    retry there with e.min_bytes finds what it names free."""
    m, opt = wrap(least("mimose"), "mimose")
    ids = updates()[0][0]
    F.cross_entropy(m(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()  # the gradients resident
    m.budget = m.budget_bytes // 2
    live = memtrain.memory_stats()["live_bytes"]
    try:
        m(ids[:, :-1])
    except memtrain.Infeasible as refused:
        assert memtrain.memory_stats()["live_bytes"] == live
        m.budget = refused.min_bytes
        F.cross_entropy(m(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
    else:
        raise AssertionError("half the least was accepted")


OPTIMIZERS = {"adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
              "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True),
              "adam-amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-3, amsgrad=True)}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_an_optimizer_made_after_wrapping_is_refused_before_its_first_update_passes_the_budget(optimizer):
    """An optimizer memtrain was not given (as transformers' Trainer makes
    its own): a budget that holds the steps but not the weights, the
    gradients and the state the optimizer's first update makes is refused
    at that update, before it runs (memtrain.Infeasible, naming the least):
    the weights, the gradients and the optimizer as they were. Under the
    least it names, the same update runs and the loop trains within it, to
    the plain loop's weights. (Short rows: the weights outweigh the
    activations, as in a large model's fine-tuning.)"""
    g = torch.Generator().manual_seed(2)
    data = [[torch.randint(0, VOCAB, (1, n + 1), generator=g) for n in (8, 5, 7)] for _ in range(3)]
    sample = data[0][0][:, :-1]
    net = gpt()
    plain = train(net, data, OPTIMIZERS[optimizer](net.parameters()), False)
    del net
    m = memtrain.Module(gpt(), budget=memtrain.least_budget(gpt(), sample, autocast=False), sample=sample,
                        autocast=False)
    opt = OPTIMIZERS[optimizer](m.parameters())
    first, rest = data[0], data[1:]
    for step, ids in enumerate(first):
        torch.manual_seed(step)  # as train() seeds update 0
        (F.cross_entropy(m(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()) / len(first)).backward()
    weights = [digest(p) for p in m.parameters()]  # digests: copies would count against the budget
    grads = [digest(p.grad) for p in m.parameters()]
    with pytest.raises(memtrain.Infeasible, match="would make .* of state, and need .* above it") as refused:
        opt.step()
    assert len(opt.state) == 0
    assert weights == [digest(p) for p in m.parameters()]
    assert grads == [digest(p.grad) for p in m.parameters()]
    assert refused.value.min_bytes > m.budget_bytes
    m.budget = refused.value.min_bytes
    del refused
    memtrain.reset_peak()
    opt.step()
    opt.zero_grad(set_to_none=True)
    assert memtrain.memory_stats()["peak_bytes"] <= m.budget_bytes
    assert train(m, rest, opt, False, budget_of=lambda: m.budget_bytes, start=1) == plain
