"""The loops language models are trained with, as a matrix rather than named
cases, each pair of its factors' values in some row: transformers' Llama at
a 32000-word vocabulary, in fp32 or under bfloat16 autocast, one micro-batch
or four accumulated, the loss computed by the model (labels) or by the loop,
AdamW given to memtrain or not, the model's output kept through the
backward or let go first (as keeps_output says), at budgets from memtrain's
least up to "100%". Every budget the constructor accepts trains: nothing is
raised into the loop, every update's peak (the optimizer's included) stays
within the budget, and the weights equal the plain loop's, bit for bit.
transformers' Trainer trains the same model through the wrapper exactly as
without it."""

import contextlib
import gc
import random
import tempfile
import warnings

import pytest
import torch
import torch.nn.functional as F

import memtrain
from exact import digest
from trainer_loop import Texts, collate, llama, trainer_run, trainer_sample, update_peaks

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

VOCAB = 32000
ROWS = 2
# Micro-steps per loop: enough that, after the Module's collection steps
# (every block checkpointed, to measure it), most are planned.
MICRO_STEPS = 8


def updates(micro, seed=0):
    """MICRO_STEPS micro-batches, each of its own length, in updates of `micro`."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    return [[torch.randint(0, VOCAB, (ROWS, rng.randint(16, 64)), generator=g) for _ in range(micro)]
            for _ in range(MICRO_STEPS // micro)]


def longest(data):
    return max((ids for update in data for ids in update), key=lambda ids: ids.shape[1])


def micro_loss(model, ids, labels, kept=None):
    """The micro-batch's loss; the output appended to `kept`, where given,
    as a loop that holds it through the backward holds it: `kept` holds the
    last micro-step's output still, replaced once this forward returns, as
    a loop's `out = model(x)` replaces it."""
    out = model(input_ids=ids, labels=ids) if labels else model(input_ids=ids)
    if kept is not None:
        kept[:] = [out]
    if labels:
        return out.loss
    return F.cross_entropy(out.logits[:, :-1].float().reshape(-1, VOCAB), ids[:, 1:].reshape(-1))



def train(model, data, bf16, labels, opt=None, budget_of=None, backward_in_autocast=False, keeps=False,
          plans=None):
    """The loop: AdamW, autocast around the forward (and the backward,
    where backward_in_autocast), the loss divided over the micro-batches,
    the output held through the backward where `keeps`, and into the
    next micro-step's forward where `keeps` is "next" (out = model(x);
    out.loss.backward(), with `out` alive until the next call returns).
    Returns the weights and the highest update's peak; with budget_of,
    checks that each update, its optimizer step included, peaked within
    the budget; appends each micro-step's (plan, schedule) to `plans`."""
    opt = opt or torch.optim.AdamW(model.parameters(), lr=1e-3)
    highest = 0
    carried = []  # keeps == "next": the last micro-step's output
    for k, update in enumerate(data):
        memtrain.reset_peak()
        for ids in update:
            kept = carried if keeps == "next" else [] if keeps else None
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = micro_loss(model, ids, labels, kept) / len(update)
                if backward_in_autocast:
                    loss.backward()
            if not backward_in_autocast:
                loss.backward()
            del kept
            if plans is not None:
                plans.append((model.last_step["plan"], model.last_step["schedule"]))
        opt.step()
        opt.zero_grad(set_to_none=True)
        peak = memtrain.memory_stats()["peak_bytes"]
        highest = max(highest, peak)
        if budget_of is not None:
            assert peak <= budget_of(), f"update {k}: peak {peak} bytes over the budget {budget_of()}"
    return [digest(p) for p in model.parameters()], highest


_plain = {}


def plain_loop(bf16, micro, labels, keeps=False):
    """The plain loop's weights and peak, and the peak with every layer
    checkpointed (transformers' own gradient checkpointing), measured once
    per loop."""
    key = (bf16, micro, labels, keeps)
    if key not in _plain:
        data = updates(micro)
        peaks = []
        for checkpointed in (False, True):
            model = llama()
            if checkpointed:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.train()
            weights, peak = train(model, data, bf16, labels, keeps=keeps)
            peaks.append(peak)
            if not checkpointed:
                plain_weights = weights
            del model, weights
            gc.collect()
        _plain[key] = (plain_weights, peaks[0], peaks[1])
    return _plain[key]


def wrap(budget, sample, opt_given, autocast=None, keeps=True):
    model = llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if opt_given else None
    # Unchunked: the matrix holds the exact contract (chunked heads: test_causal_lm_head.py).
    return memtrain.Module(model, budget=budget, sample=sample, optimizer=opt, chunked_loss=False,
                           autocast=autocast, keeps_output=keeps), opt


def least_budget(sample, opt_given, autocast=None, keeps=True):
    model = llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if opt_given else None
    return memtrain.least_budget(model, sample, opt, chunked_loss=False, autocast=autocast, keeps_output=keeps)


# (precision, loss, micro-batches, optimizer given, output kept: False, True
# through the backward, "next" into the next micro-step too): each row
# trains the plain loop, every layer checkpointed and four budgets, too
# long for all 32 combinations. Every pair of values of any two factors is
# in some row, and the loop most at risk (four micro-batches, the
# optimizer's state counted, the output let go) in all four of precision
# and loss.
LOOPS = [(False, True, 4, True, False), (False, False, 4, True, False), (True, True, 4, True, False),
         (True, False, 4, True, False), (False, True, 1, True, False), (True, False, 1, True, False),
         (True, True, 1, False, False), (True, False, 4, False, False), (False, True, 4, False, False),
         (True, False, 4, True, True), (True, True, 1, False, True), (False, False, 1, False, True),
         (True, True, 4, True, "next"), (False, False, 1, True, "next")]


def loop_id(bf16, labels, micro, opt_given, keeps):
    return (f"{'bf16' if bf16 else 'fp32'}-loss-in-{'model' if labels else 'loop'}-{micro}-micro-adamw-"
            f"{'given' if opt_given else 'not-given'}-output-"
            f"{'kept-into-the-next' if keeps == 'next' else 'kept' if keeps else 'let-go'}")


@pytest.mark.parametrize("bf16,labels,micro,opt_given,keeps", LOOPS, ids=[loop_id(*row) for row in LOOPS])
def test_every_accepted_budget_trains_within_itself_exactly(bf16, labels, micro, opt_given, keeps):
    """Without optimizer=, the least is stated without the optimizer's
    state, which its first update adds: a budget in bytes below the least
    with it may be refused at a later step, before that step runs; every
    other accepted budget trains."""
    plain_weights, plain_peak, checkpointed_peak = plain_loop(bf16, micro, labels, keeps)
    data = updates(micro)
    ids = longest(data)
    sample = {"input_ids": ids, "labels": ids} if labels else {"input_ids": ids}  # as the loop calls the model
    keeps_output = bool(keeps)
    least = least_budget(sample, opt_given, keeps=keeps_output)
    least_with_optimizer = least if opt_given else least_budget(sample, True, keeps=keeps_output)
    gc.collect()
    budgets = {"least": least, "checkpointed": checkpointed_peak,
               "midpoint": (checkpointed_peak + plain_peak) // 2, "100%": "100%"}
    trained = []
    for name, budget in budgets.items():
        gc.collect()
        try:
            m, opt = wrap(budget, sample, opt_given, keeps=keeps_output)
        except memtrain.Infeasible as refused:
            # Only a budget below the least stated for the same sample is refused.
            assert name != "least" and name != "100%", f"{name}: {refused}"
            assert budget < refused.min_bytes, f"{name}: {refused}"
            continue
        # Nor is the first update of an optimizer memtrain was not told of planned for.
        may_be_refused_later = isinstance(budget, int) and budget < least_with_optimizer
        within = (lambda: m.budget_bytes) if not may_be_refused_later else None
        plans = []
        try:
            weights, _ = train(m, data, bf16, labels, opt, budget_of=within, keeps=keeps, plans=plans)
            assert m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]
        except memtrain.Infeasible as later:
            assert may_be_refused_later, f"{name}: {later}"
            assert later.min_bytes > m.budget_bytes
            # It says why: the loop's optimizer, met after the budget was
            # checked, refused at its first update (or at a later step).
            assert ("of state, and need" in str(later) or "the optimizer's state of" in str(later)) and \
                "optimizer=" in str(later), str(later)
            assert m.last_step is None or m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]
            del m, opt, later
            continue
        for k, (a, b) in enumerate(zip(plain_weights, weights)):
            assert a == b, f"{name}: parameter {k} differs from the plain loop's"
        assert len(plans) == MICRO_STEPS and plans[-1][0] != "collect", plans  # planned steps ran
        trained.append(name)
        del m, opt, weights
    assert "100%" in trained and ("least" in trained or not opt_given)


def gpt2(seed=0):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=128)
    return transformers.GPT2LMHeadModel(config)


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
def test_a_loop_keeping_its_output_into_the_next_step_trains_at_the_least(make):
    """out = m(x); out.loss.backward(): each micro-step's output is alive
    until the next forward returns, resident as the next step begins, and
    counted once. At the least stated for that loop it trains within the
    budget, bit-equal to the plain loop: bf16 autocast, the model's loss,
    two micro-batches of four rows per update, lengths changing and then
    the longest again and again."""
    rng = random.Random(1)
    g = torch.Generator().manual_seed(1)
    lengths = [rng.randint(16, 64) for _ in range(4)] + [64] * 8
    data = [[torch.randint(0, VOCAB, (4, t), generator=g) for t in lengths[i:i + 2]]
            for i in range(0, len(lengths), 2)]
    ids = longest(data)
    sample = {"input_ids": ids, "labels": ids}
    plain = make()
    plain_weights, _ = train(plain, data, True, True, keeps="next")
    del plain
    gc.collect()
    model = make()
    least = memtrain.least_budget(model, sample, torch.optim.AdamW(model.parameters(), lr=1e-3), chunked_loss=False)
    model = make()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    m = memtrain.Module(model, budget=least, sample=sample, optimizer=opt, chunked_loss=False)
    weights, _ = train(m, data, True, True, opt, budget_of=lambda: m.budget_bytes, keeps="next")
    assert m.budget_bytes == least
    for k, (a, b) in enumerate(zip(plain_weights, weights)):
        assert a == b, f"parameter {k} differs from the plain loop's"


@pytest.mark.parametrize("keeps", [False, True], ids=["output-let-go", "output-kept"])
@pytest.mark.parametrize("labels", [True, False], ids=["loss-in-model", "loss-in-loop"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_the_least_is_held_to_every_layer_checkpointed_at_the_order_it_holds_for(bf16, labels, keeps):
    """memtrain's least holds for any order of the micro-batches: the
    longest as a later micro-step, every gradient and AdamW's state alive.
    transformers' own checkpointing of every layer, in that order (the
    longest batch in every micro-step of two updates), peaks within 2% of
    it, and not 5% below, for the loop's own precision (autocast=)."""
    ids = longest(updates(4))
    model = llama()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    _, checkpointed = train(model, [[ids] * 4] * 2, bf16, labels, keeps=keeps)
    del model
    gc.collect()
    sample = {"input_ids": ids, "labels": ids} if labels else {"input_ids": ids}
    least = least_budget(sample, True, autocast=torch.bfloat16 if bf16 else False, keeps=keeps)
    assert 0.95 * checkpointed < least <= 1.02 * checkpointed, (least, checkpointed)


@pytest.mark.parametrize("labels", [True, False], ids=["loss-in-model", "loss-in-loop"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_a_least_for_the_loops_own_precision_trains_it_and_refuses_the_other(bf16, labels):
    """autocast= names the precision the loop runs the model in: the least
    is measured for it alone, at most the least for both, trains the loop
    within itself, bit-equal to the plain loop, and a forward in the other
    precision is refused before it changes anything."""
    plain_weights, _, _ = plain_loop(bf16, 4, labels)
    data = updates(4)
    ids = longest(data)
    sample = {"input_ids": ids, "labels": ids} if labels else {"input_ids": ids}
    named = torch.bfloat16 if bf16 else False
    both = least_budget(sample, True)
    least = least_budget(sample, True, autocast=named)
    assert least <= both, (least, both)
    gc.collect()
    m, opt = wrap(least, sample, True, autocast=named)
    other = ("without autocast, .* under torch.bfloat16 autocast" if bf16
             else "under torch.bfloat16 autocast, .* without it")
    with pytest.raises(memtrain.UsageError, match=f"this forward runs {other} .*autocast=None for both"):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not bf16):
            micro_loss(m, ids, labels)
    assert m.last_step is None and all(p.grad is None for p in m.parameters())
    weights, _ = train(m, data, bf16, labels, opt, budget_of=lambda: m.budget_bytes)
    for k, (a, b) in enumerate(zip(plain_weights, weights)):
        assert a == b, f"parameter {k} differs from the plain loop's"


def chunked_run(m, data, bf16, opt, use_step, budget_of, first_update_counted=True):
    """The loop with the loss in the model, each micro-step by
    loss.backward() or m.step(closure); every update's peak within the
    budget (the first's only where memtrain counted the optimizer's state
    before it). Returns the micro-steps' losses."""
    losses = []
    for k, update in enumerate(data):
        memtrain.reset_peak()
        for ids in update:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                if use_step:
                    loss = m.step(lambda: micro_loss(m, ids, True) / len(update))
                else:
                    loss = micro_loss(m, ids, True) / len(update)
            if not use_step:
                loss.backward()
            losses.append(loss.item())
        opt.step()
        opt.zero_grad(set_to_none=True)
        peak = memtrain.memory_stats()["peak_bytes"]
        if k > 0 or first_update_counted:
            assert peak <= budget_of(), f"update {k}: peak {peak} bytes over the budget {budget_of()}"
    return losses


# Every pair of precision, optimizer given and how the micro-step runs.
CHUNKED_LOOPS = [(False, True, False), (False, False, True), (True, True, True), (True, False, False)]


@pytest.mark.parametrize("bf16,opt_given,use_step", CHUNKED_LOOPS,
                         ids=[f"{'bf16' if b else 'fp32'}-adamw-{'given' if o else 'not-given'}-"
                              f"{'m.step' if u else 'loss.backward'}" for b, o, u in CHUNKED_LOOPS])
def test_the_chunked_head_trains_within_every_budget_it_accepts(bf16, opt_given, use_step):
    """The head and the loss chunked where the budget needs them
    (chunked_loss left to memtrain), four micro-batches of changing
    lengths, at the least stated (it holds in either precision, with room
    for the loop's own small tensors), 10% above it and 100% (and 70% where the
    optimizer is not given, a refusal allowed): each chunk is chosen
    from what is free beside what the chunked loss holds whatever the
    chunk, so nothing but a refusal before a step reaches the loop, and
    that only for an optimizer memtrain was not told of; every update
    stays within the budget, and the losses follow the plain loop's."""
    data = updates(4)
    ids = longest(data)
    sample = {"input_ids": ids, "labels": ids}
    model = llama()
    plain_losses = chunked_run(model, data, bf16, torch.optim.AdamW(model.parameters(), lr=1e-3), False,
                               lambda: float("inf"))
    del model
    gc.collect()

    def wrapped(budget):
        model = llama()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with pytest.warns(UserWarning, match="chunks") if budget != "100%" else contextlib.nullcontext():
            m = memtrain.Module(model, budget=budget, sample=sample, optimizer=opt if opt_given else None)
        return m, opt
    model = llama()
    with pytest.raises(memtrain.Infeasible) as refused:  # and no warning of chunks: no Module results
        memtrain.Module(model, budget=1, sample=sample,
                        optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3) if opt_given else None)
    least = refused.value.min_bytes
    del refused, model
    gc.collect()
    budgets = (least, least * 110 // 100, "100%")
    for budget in budgets if opt_given else budgets + ("70%",):
        m, opt = wrapped(budget)
        try:
            losses = chunked_run(m, data, bf16, opt, use_step, lambda: m.budget_bytes, opt_given)
        except memtrain.Infeasible as later:
            # The least was stated without the state of an optimizer it was not given.
            assert not opt_given and budget != "100%", f"{budget}: {later}"
            assert "optimizer=" in str(later), str(later)
            continue
        finally:
            del m, opt
            gc.collect()
        assert losses == pytest.approx(plain_losses, rel=1e-3), budget


@pytest.mark.parametrize("budget", ["least", "100%"])
@pytest.mark.parametrize("labels", [True, False], ids=["loss-in-model", "loss-in-loop"])
def test_a_backward_inside_the_autocast_context_trains_exactly(labels, budget):
    """loss.backward() inside the caller's bfloat16 autocast context, as
    many loops write it: autocast's cache then still holds the casts of the
    weights the forward made, from the forward's graph. Blocks recomputed
    in the backward (the least) or kept (100%) make their own casts, and
    the weights equal the plain loop's, bit for bit."""
    data = updates(2)
    ids = longest(data)
    sample = {"input_ids": ids, "labels": ids} if labels else {"input_ids": ids}
    plain = train(llama(), data, True, labels, backward_in_autocast=True)[0]
    gc.collect()
    m, opt = wrap(least_budget(sample, True) if budget == "least" else budget, sample, True)
    plans = []
    weights, _ = train(m, data, True, labels, opt, budget_of=lambda: m.budget_bytes, backward_in_autocast=True,
                       plans=plans)
    assert weights == plain
    # Planned steps ran (after the collection steps, which recompute every
    # block): at the least, the longer ones recompute blocks; at 100%, none does.
    planned = [schedule for plan, schedule in plans if plan != "collect"]
    recomputed = [any(op.startswith(("Fck", "Fn")) for op in schedule) for schedule in planned]
    assert planned and (any(recomputed) if budget == "least" else not any(recomputed)), plans


def lm_loss(logits, ids, greedy=False):
    """The cross-entropy; `greedy`: as a step that also logs a statistic of
    the logits computes it, holding a second float copy of half of them."""
    loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
    if not greedy:
        return loss
    half = logits[:, : logits.shape[1] // 2].float() * 2
    return loss + 0.0 * half.logsumexp(-1).sum()


def test_a_loss_greedier_than_planned_for_spills_the_kept_activations_and_trains_exactly():
    """Two steps teach memtrain what the loop's code after the blocks needs
    at a size, and the third step's plan keeps activations up to it; that
    step's loss needs more (it logs a statistic of the logits). Its
    allocations move kept activations to host memory instead of failing,
    the backward brings them back, and the step is the plain one's; the
    next step of that size plans with what was learnt."""
    from models import NanoGPT

    g = torch.Generator().manual_seed(0)
    data = [torch.randint(0, VOCAB, (4, 129), generator=g) for _ in range(4)]

    def run(model):
        torch.manual_seed(3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        reports = []
        for k, ids in enumerate(data):
            memtrain.reset_peak()
            lm_loss(model(ids[:, :-1]), ids, greedy=k == 2).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            reports.append((getattr(model, "last_step", None), memtrain.memory_stats()["peak_bytes"]))
        return reports, [p.detach().clone() for p in model.parameters()]

    _, plain = run(NanoGPT(width=256, layers=6))
    gc.collect()
    model = NanoGPT(width=256, layers=6)
    # A budget whose plan for this size keeps most activations, with little room to spare.
    m = memtrain.Module(model, budget="90%", blocks=model.blocks, sample=data[0][:, :-1], collect_steps=0,
                        keeps_output=False)
    reports, weights = run(m)
    assert all(torch.equal(a, b) for a, b in zip(plain, weights))
    for report, peak in reports:
        assert peak <= report["budget_bytes"], report
        assert report["peak_bytes"] <= report["budget_bytes"], report
    (_, _), (planned, _), (greedy, _), (after, _) = reports
    assert planned["spilled_bytes"] == 0 and planned["plan"] != "frugal", planned
    assert greedy["spilled_bytes"] > 0, greedy
    assert after["spilled_bytes"] == 0, after


def test_a_budget_the_loop_cannot_fit_is_torchs_out_of_memory_error_then_a_refusal():
    """A budget in bytes below what the loop's own loss needs with nothing
    of memtrain's left on the device: the allocation fails as PyTorch's
    allocators fail (torch.OutOfMemoryError, which loops and accelerate
    already catch), saying what the step needs, and the next step of that
    size is refused before it changes anything (memtrain.Infeasible, naming
    the least)."""
    from models import NanoGPT

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (4, 97), generator=g)
    model = NanoGPT()
    m = memtrain.Module(model, budget="100%", blocks=model.blocks, sample=ids[:, :-1], keeps_output=False)
    m.budget = m.budget_bytes  # the same bytes, no longer a share of the loop's step
    with pytest.raises(torch.OutOfMemoryError, match="the code after the blocks.*needs more than"):
        lm_loss(m(ids[:, :-1]), ids, greedy=True).backward()
    m.zero_grad(set_to_none=True)
    rng = torch.get_rng_state()
    with pytest.raises(memtrain.Infeasible) as refused:
        m(ids[:, :-1])
    assert refused.value.min_bytes > m.budget_bytes
    assert torch.equal(rng, torch.get_rng_state())
    assert all(p.grad is None for p in m.parameters())


def test_100_percent_is_of_the_loops_own_step_and_always_trains():
    """The same loop under "100%": calibration's stand-in loss needed less
    than the loop's, so the budget grows to what the loop's own step holds
    as it shows it, and every step trains exactly, within the budget as it
    stands when the step ends."""
    from models import NanoGPT

    g = torch.Generator().manual_seed(0)
    data = [torch.randint(0, VOCAB, (4, length), generator=g) for length in (97, 65, 97)]

    def run(model):
        torch.manual_seed(3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for ids in data:
            memtrain.reset_peak()
            lm_loss(model(ids[:, :-1]), ids, greedy=True).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if isinstance(model, memtrain.Module):
                assert memtrain.memory_stats()["peak_bytes"] <= model.budget_bytes
                assert model.last_step["peak_bytes"] <= model.last_step["budget_bytes"]
        return [digest(p) for p in model.parameters()]

    plain = run(NanoGPT())
    gc.collect()
    model = NanoGPT()
    m = memtrain.Module(model, budget="100%", blocks=model.blocks, sample=data[0][:, :-1], keeps_output=False)
    stand_in = m.budget_bytes
    assert run(m) == plain
    assert m.budget_bytes > stand_in


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_transformers_trainer_trains_through_the_wrapper_exactly(bf16):
    """With the Trainer's defaults (remove_unused_columns: the columns are
    read from the wrapper's signature; num_items_in_batch counted over the
    shifted labels: it reads the model's loss_type through the wrapper), its
    own AdamW counted from its first update, the losses and every weight
    equal the plain Trainer's."""
    pytest.importorskip("accelerate")
    plain_losses, plain_weights, _ = trainer_run(llama(), bf16)
    sample = trainer_sample()
    gc.collect()
    m = memtrain.Module(llama(), budget="100%", sample=sample)
    before = m.budget_bytes
    losses, weights, trainer = trainer_run(m, bf16)
    assert trainer._loss_shifts_labels
    assert losses == plain_losses
    assert all(torch.equal(a, b) for a, b in zip(plain_weights, weights))
    # N% is of the loop's step with the optimizer's state, once it exists.
    assert m.budget_bytes > before
    assert m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_the_trainer_given_the_measured_optimizer_trains_at_the_least(bf16):
    """The route a late optimizer's refusal names: AdamW made first, given
    to memtrain.Module(optimizer=) and to Trainer(optimizers=). The least
    stated counts its state, and the Trainer trains at that least itself,
    every update within the budget, nothing refused."""
    pytest.importorskip("accelerate")
    sample = trainer_sample()

    def made():
        model = llama()
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = made()
    with pytest.raises(memtrain.Infeasible) as refused:
        memtrain.Module(model, budget=1, sample=sample, optimizer=opt)
    budget = refused.value.min_bytes
    del model, opt, refused
    gc.collect()
    model, opt = made()
    m = memtrain.Module(model, budget=budget, sample=sample, optimizer=opt)
    peaks = []

    losses, _, _ = trainer_run(m, bf16, callbacks=[update_peaks(peaks)], optimizers=(opt, None))
    assert len(losses) == 3 and len(opt.state) > 0  # the Trainer stepped the optimizer it was given
    assert all(peak <= budget for peak in peaks), (peaks, budget)
    assert m.budget_bytes == budget


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_the_trainers_optimizer_outgrowing_the_budget_turns_the_chunked_head_on(bf16):
    """A budget in bytes that holds the whole logits until the Trainer's
    AdamW makes its state (counted at its first update), and not after:
    with chunked_loss left to memtrain, the next step is not refused; the
    head and the loss run in chunks from then on, the blocks planned
    afresh (measured again inside the Trainer's autocast, where bf16),
    every update within the budget, the losses within the chunked
    cross-entropy's tolerance of the plain Trainer's."""
    pytest.importorskip("accelerate")
    sample = trainer_sample()
    plain_losses = trainer_run(llama(), bf16=bf16)[0]
    gc.collect()

    def least(chunked, opt_given):
        model = llama()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if opt_given else None
        return memtrain.least_budget(model, sample, opt, chunked_loss=chunked, keeps_output=False)
    whole, whole_with_state, chunked_with_state = least(False, False), least(False, True), least(True, True)
    budget = max(whole, chunked_with_state) + (1 << 20)
    assert budget < whole_with_state, (whole, whole_with_state, chunked_with_state)
    gc.collect()  # the refused Modules
    m = memtrain.Module(llama(), budget=budget, sample=sample, keeps_output=False)  # compute_loss lets it go
    peaks = []

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        chunked = update_peaks(peaks, lambda: m.last_step["chunked_loss"])
        losses, _, trainer = trainer_run(m, bf16=bf16, callbacks=[chunked])
    # compute_loss lets the output go, chunked or not: nothing says it keeps it.
    assert not [w for w in seen if "keeps the model's output" in str(w.message)]
    # The step run again inside accelerate's autocast wrapper leaves autocast as it found it.
    assert not torch.is_autocast_enabled("cpu")
    assert len(losses) == len(plain_losses) == 3
    assert losses == pytest.approx(plain_losses, rel=1e-3 if bf16 else 1e-4)
    assert all(peak <= budget for peak, _ in peaks), (peaks, budget)
    assert not peaks[0][1] and peaks[-1][1], peaks  # whole logits at first, chunks once the state exists
    assert m.budget_bytes == budget


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_the_trainers_micro_steps_rerun_through_memtrain_exactly(bf16):
    """memtrain.rerunnable(trainer): the Trainer's micro-steps run through
    m.step(closure). One that runs out of budget in the forward (torch's
    out-of-memory error, once, in the third micro-step) is rolled back and
    run again: the losses and every weight are the plain Trainer's."""
    pytest.importorskip("accelerate")
    plain_losses, plain_weights, _ = trainer_run(llama(), bf16)
    gc.collect()
    m = memtrain.Module(llama(), budget="100%", sample=trainer_sample())
    calls = []

    def fault(module, args):
        calls.append(len(calls))
        if len(calls) == 3:
            raise torch.OutOfMemoryError("injected: out of memory")
    handle = m.model.layers[1].register_forward_pre_hook(fault)
    losses, weights, _ = trainer_run(m, bf16, prepare=memtrain.rerunnable)
    handle.remove()
    assert len(calls) == 2 * 3 + 1  # 3 updates of 2 micro-steps, one of them twice
    assert losses == plain_losses
    assert all(torch.equal(a, b) for a, b in zip(plain_weights, weights))


def test_rerunnable_refuses_a_trainer_of_a_plain_model():
    pytest.importorskip("accelerate")
    args = transformers.TrainingArguments(output_dir=tempfile.mkdtemp(), use_cpu=True, report_to=[],
                                          save_strategy="no")
    trainer = transformers.Trainer(model=llama(), args=args, train_dataset=Texts(), data_collator=collate)
    with pytest.raises(memtrain.UsageError, match="not a memtrain.Module; give the Trainer model=memtrain.Module"):
        memtrain.rerunnable(trainer)


@pytest.mark.parametrize("precision", ["no", "bf16"])
def test_accelerate_prepares_the_wrapped_model_and_trains_it_exactly(precision):
    """accelerate's Accelerator().prepare(m, opt) and accelerator.backward,
    with gradient accumulation and its mixed precision: every weight equals
    the same loop's on the plain model."""
    accelerate = pytest.importorskip("accelerate")
    data = updates(2)

    def run(model, sample=None):
        if sample is not None:
            model = memtrain.Module(model, budget="100%", sample=sample)
        accelerate.state.AcceleratorState._reset_state(reset_partial_state=True)  # one per process otherwise
        accelerator = accelerate.Accelerator(cpu=True, mixed_precision=precision, gradient_accumulation_steps=2)
        model, opt = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
        for update in data:
            for ids in update:
                with accelerator.accumulate(model):
                    accelerator.backward(model(input_ids=ids, labels=ids).loss)
                    opt.step()
                    opt.zero_grad()
        return [digest(p) for p in model.parameters()]

    plain = run(llama())
    gc.collect()
    assert run(llama(), sample={"input_ids": longest(data)}) == plain
