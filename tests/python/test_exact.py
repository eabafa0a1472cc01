"""A memtrain.Module computes what the plain model computes, bit for bit,
under budgets that force recomputation, with dropout and changing sizes."""

import re

import pytest
import torch
import torch.nn.functional as F

import memtrain
from models import mlp, transformer


def token_batch(step, vocab=500, classes=20):
    g = torch.Generator().manual_seed(1000 + step)
    rows, length = 5 + step % 4, 20 + (11 * step) % 45  # the size changes every step, up to 8 x 64
    return torch.randint(0, vocab, (rows, length), generator=g), torch.randint(0, classes, (rows, length), generator=g)


def run_both(planner, budget, steps=9, prediction_scale=1.0):
    plain = transformer()
    wrapped = memtrain.Module(transformer(), budget=budget, planner=planner,
                              sample=torch.randint(0, 500, (8, 64)), _prediction_scale=prediction_scale)
    # SGD keeps no state: an N% budget is of the model's own peak.
    opt_plain = torch.optim.SGD(plain.parameters(), lr=0.05)
    opt_wrapped = torch.optim.SGD(wrapped.parameters(), lr=0.05)
    plans, recomputed = [], 0
    for step in range(steps):
        x, y = token_batch(step)
        torch.manual_seed(50 + step)
        loss_plain = F.cross_entropy(plain(x).flatten(0, 1), y.flatten())
        opt_plain.zero_grad(set_to_none=True)
        loss_plain.backward()
        rng_plain = torch.get_rng_state()
        torch.manual_seed(50 + step)
        loss_wrapped = F.cross_entropy(wrapped(x).flatten(0, 1), y.flatten())
        opt_wrapped.zero_grad(set_to_none=True)
        loss_wrapped.backward()
        assert torch.equal(loss_plain, loss_wrapped), f"step {step}"
        for (name, p), q in zip(plain.named_parameters(), wrapped.parameters()):
            assert torch.equal(p.grad, q.grad), f"step {step}: gradient of {name} differs"
        # Recomputation replays dropout's draws and leaves the stream where the plain model does.
        assert torch.equal(rng_plain, torch.get_rng_state()), f"step {step}"
        opt_plain.step()
        opt_wrapped.step()
        s = wrapped.last_step
        plans.append(s["plan"])
        if s["plan"] not in ("collect", "frugal"):
            stages = len(list(wrapped.children())) + 1  # and the loss boundary
            recomputed += sum(op.startswith("F") for op in s["schedule"]) - stages
            assert s["peak_bytes"] <= s["budget_bytes"], s
    for p, q in zip(plain.parameters(), wrapped.parameters()):
        assert torch.equal(p, q)
    return plans, recomputed, wrapped


def test_mispredicted_steps_are_retried_exactly():
    # Plans from a chain that claims 40% of the activation memory run out of
    # budget, in the forward or in the backward; each such step is rolled back
    # and run again under a stricter plan, and still computes what the plain model does.
    plans, _, wrapped = run_both("optimal", "45%", steps=10, prediction_scale=0.4)
    assert "retry" in plans


def test_mispredicted_steps_onto_accumulated_gradients_are_retried_exactly():
    # Gradient accumulation with gradients zeroed in place: a step that runs
    # out in its backward runs again without counting the later blocks'
    # gradients twice, onto whatever .grad held.
    plain = transformer()
    wrapped = memtrain.Module(transformer(), budget="45%", planner="optimal", sample=torch.randint(0, 500, (8, 64)),
                              _prediction_scale=0.4)
    plans = []
    for step in range(10):
        if step % 2 == 0:
            plain.zero_grad(set_to_none=False)
            wrapped.zero_grad(set_to_none=False)
        x, y = token_batch(step)
        for model in (plain, wrapped):
            torch.manual_seed(50 + step)
            F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        for (name, p), q in zip(plain.named_parameters(), wrapped.parameters()):
            assert torch.equal(p.grad, q.grad), f"step {step}: gradient of {name} differs"
        plans.append(wrapped.last_step["plan"])
    assert "retry" in plans, plans


def test_the_step_after_a_retry_runs_the_stricter_schedule_from_the_cache():
    # The step planner's behaviour after a retry, which the Trainer shares
    # (tests/runtime/training/trainer_test.cpp): the stricter schedule
    # becomes the size's plan, so the same size's next step is a cache hit.
    wrapped = memtrain.Module(transformer(), budget="45%", planner="optimal", sample=torch.randint(0, 500, (8, 64)),
                              _prediction_scale=0.4)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.05)
    x, y = token_batch(3)
    steps = []
    for _ in range(7):
        loss = F.cross_entropy(wrapped(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps.append(wrapped.last_step)
    assert [s["plan"] for s in steps[:4]] == ["collect"] * 4
    assert steps[4]["plan"] == "retry", [s["plan"] for s in steps]
    for later in steps[5:]:
        assert later["plan"] == "cached" and later["schedule"] == steps[4]["schedule"], later


@pytest.mark.parametrize("planner,budget", [("optimal", "50%"), ("optimal", "40%"), ("mimose", "50%")])
def test_gradients_equal_the_plain_model(planner, budget):
    plans, recomputed, wrapped = run_both(planner, budget)
    # Collection steps, or the least-memory schedule where the collection
    # schedule is predicted not to fit.
    assert set(plans[:4]) <= {"collect", "frugal"} and "collect" in plans[:4]
    assert set(plans[4:]) <= {"new", "cached"} and "new" in plans[4:]
    assert recomputed > 0, "a budget this low must make memtrain recompute"


def recomputes(schedule):
    """Some stage's forward runs more than once: dropped ("Fn") or checkpointed ("Fck") and rerun."""
    stages = [re.sub(r"\D", "", op) for op in schedule if op.startswith("F")]
    return len(stages) > len(set(stages))


def test_dropout_masks_replayed_on_recompute():
    torch.manual_seed(3)
    # At the sample's size: keeping everything is the 100% a budget of 70% refuses.
    x = torch.randn(512, 64)
    plain, wrapped = mlp(), memtrain.Module(mlp(), budget="70%", planner="optimal", sample=torch.randn(512, 64))
    recomputing_steps = 0
    for step in range(7):
        plain.zero_grad(set_to_none=True)
        wrapped.zero_grad(set_to_none=True)
        torch.manual_seed(step)
        plain(x).square().mean().backward()
        torch.manual_seed(step)
        wrapped(x).square().mean().backward()
        for p, q in zip(plain.parameters(), wrapped.parameters()):
            assert torch.equal(p.grad, q.grad), f"step {step}"
        s = wrapped.last_step
        recomputing_steps += s["plan"] != "collect" and recomputes(s["schedule"])
    assert recomputing_steps > 0


def test_input_gradient_reaches_the_callers_graph():
    torch.manual_seed(0)
    plain, wrapped = mlp(), memtrain.Module(mlp(), budget="90%", planner="optimal", sample=torch.randn(256, 64))
    for _ in range(5):
        # Unset gradients let a mispredicted backward be retried (plans depend on timings).
        plain.zero_grad(set_to_none=True)
        wrapped.zero_grad(set_to_none=True)
        a = torch.randn(200, 64, requires_grad=True)
        b = a.detach().clone().requires_grad_(True)
        torch.manual_seed(9)
        (plain(a * 2) ** 2).sum().backward()
        torch.manual_seed(9)
        (wrapped(b * 2) ** 2).sum().backward()
        assert torch.equal(a.grad, b.grad)


def test_state_dict_keys_are_the_models_own():
    model = transformer()
    wrapped = memtrain.Module(transformer(), budget="1GiB")
    assert list(wrapped.state_dict().keys()) == list(model.state_dict().keys())
    wrapped.load_state_dict(model.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), wrapped.parameters()))


def test_no_grad_runs_the_stages_plainly():
    model = mlp()
    wrapped = memtrain.Module(mlp(), budget="1GiB")
    x = torch.randn(16, 64)
    model.eval()
    wrapped.eval()
    with torch.no_grad():
        assert torch.equal(model(x), wrapped(x))
    assert wrapped.last_step is None
