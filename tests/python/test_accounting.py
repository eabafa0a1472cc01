"""What memtrain counts and reports about each step."""

import gc

import torch
import torch.nn.functional as F

import memtrain
from exact import digest
from models import transformer


def test_memory_stats_count_the_processes_tensors():
    memtrain.reset_peak()
    before = memtrain.memory_stats()
    t = torch.empty(1 << 20, dtype=torch.uint8)
    during = memtrain.memory_stats()
    assert during["live_bytes"] - before["live_bytes"] == 1 << 20
    del t
    after = memtrain.memory_stats()
    assert after["live_bytes"] == before["live_bytes"]
    assert after["peak_bytes"] >= before["live_bytes"] + (1 << 20)
    memtrain.reset_peak()
    assert memtrain.memory_stats()["peak_bytes"] == after["live_bytes"]


def test_last_step_reports_plan_sizes_and_peaks():
    m = memtrain.Module(transformer(), budget="40%", planner="optimal", sample=torch.randint(0, 500, (8, 64)))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    seen = []
    for step in range(10):
        length = 30 + 11 * (step % 4)
        x = torch.randint(0, 500, (5, length))
        y = torch.randint(0, 20, (5, length))
        memtrain.reset_peak()
        F.cross_entropy(m(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        s = m.last_step
        assert s["input_shape"] == [5, length] and s["input_size"] == 5 * length
        # The step's own budget; N% may grow after it, where its code after the blocks showed more.
        assert s["budget_bytes"] <= m.budget_bytes
        assert s["peak_bytes"] <= memtrain.memory_stats()["peak_bytes"]
        assert s["schedule"][-1] == "B0" and "L" in s["schedule"]
        seen.append(s["plan"])
        if s["plan"] == "collect":
            assert s["predicted_peak_bytes"] is None
        else:
            assert s["peak_bytes"] <= s["budget_bytes"]
            assert abs(s["predicted_peak_bytes"] - s["peak_bytes"]) <= 0.25 * s["peak_bytes"]
    assert seen[:4] == ["collect"] * 4 and "new" in seen and "cached" in seen


def test_a_planned_step_waits_for_the_device_once():
    # Operations are timed between marks in the device's queue; the step
    # reads their times once, at its end. Nothing else in it waits.
    m = memtrain.Module(transformer(), budget="50%", planner="mimose", sample=torch.randint(0, 500, (8, 64)))
    plans = []
    for step in range(10):
        x = torch.randint(0, 500, (5, 30 + 11 * (step % 3)))
        F.cross_entropy(m(x).flatten(0, 1), torch.randint(0, 20, x.shape).flatten()).backward()
        m.zero_grad(set_to_none=True)
        s = m.last_step
        plans.append(s["plan"])
        if s["retries"] == 0:
            assert s["synchronizations"] == 1, s
    assert "cached" in plans and "new" in plans, plans


class _SlowBlock(torch.nn.Module):
    """A block whose forward takes at least `seconds` (its backward is fast)."""

    def __init__(self, seconds):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.seconds = seconds

    def forward(self, x):
        import time
        time.sleep(self.seconds)
        return torch.tanh(self.linear(x))


def test_last_step_splits_its_time_between_the_blocks_and_memtrain():
    blocks, nap = 4, 0.05
    m = memtrain.Module(torch.nn.Sequential(*[_SlowBlock(nap) for _ in range(blocks)]), budget=1 << 30,
                        planner="optimal", collect_steps=1)
    for step in range(3):
        m(torch.randn(8 + step, 16)).sum().backward()
        s = m.last_step
        # Every block ran forward once at least, each run sleeping: that is the blocks' time, not memtrain's.
        assert s["blocks_seconds"] >= blocks * nap
        # Counting the blocks' runs as memtrain's would put a whole block's nap or more there.
        assert 0 <= s["overhead_seconds"] < nap
        assert 0 <= s["planning_seconds"] <= s["overhead_seconds"]
        assert s["blocks_seconds"] <= s["seconds"]
        if s["plan"] == "new":
            assert s["planning_seconds"] > 0


def test_the_process_peak_survives_the_resets_of_a_step():
    # memtrain measures each operation by resetting the device's peak; a
    # tensor freed before the step still counts in memory_stats()'s peak.
    m = memtrain.Module(transformer(), budget="60%", planner="optimal", sample=torch.randint(0, 500, (8, 64)))
    memtrain.reset_peak()
    live = memtrain.memory_stats()["live_bytes"]
    big = torch.empty(64 << 20, dtype=torch.uint8)
    del big
    for step in range(6):
        x = torch.randint(0, 500, (5, 40 + 7 * step))
        F.cross_entropy(m(x).flatten(0, 1), torch.randint(0, 20, x.shape).flatten()).backward()
        m.zero_grad(set_to_none=True)
    assert m.last_step["plan"] != "collect"
    assert m.last_step["peak_bytes"] < 64 << 20
    assert memtrain.memory_stats()["peak_bytes"] >= live + (64 << 20)


def on_a_thread(work):
    """work() on a worker thread: its result, or the exception it raised."""
    import threading
    out = {}

    def run():
        try:
            out["result"] = work()
        except BaseException as e:  # handed to the caller
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


def test_a_module_made_and_stepped_on_a_worker_thread_keeps_its_budget():
    """The budget counts a worker thread's tensors as the main thread's: a
    budget the main thread refuses is refused there too, and one it accepts
    trains there within itself, with the main thread's gradients."""
    from models import MaskedGPT

    sample = torch.randint(0, 300, (4, 48), generator=torch.Generator().manual_seed(0))

    def least():
        gc.collect()  # a Module refused before
        return memtrain.least_budget(MaskedGPT(layers=4), sample)

    def steps():
        gc.collect()
        m = memtrain.Module(MaskedGPT(layers=4), budget="70%", sample=sample)
        grads = []
        for length in (48, 32):
            ids = sample[:, :length]
            memtrain.reset_peak()
            m.zero_grad(set_to_none=True)
            torch.manual_seed(1)
            F.cross_entropy(m(ids).flatten(0, 1), ids.flatten()).backward()
            assert memtrain.memory_stats()["peak_bytes"] <= m.budget_bytes
            assert m.last_step["peak_bytes"] > 0
            grads.append([digest(p.grad) for p in m.parameters()])
        return grads

    main_least = least()
    assert on_a_thread(least) == main_least
    assert on_a_thread(steps) == steps()


def test_a_checkpointed_block_under_autocast_keeps_no_copy_of_its_weights():
    """Autocast keeps the bfloat16 copy of each weight it casts until the
    forward ends. A block memtrain checkpoints keeps its input only, not
    those copies (its ops cast again, to the same values): the forward of
    4 blocks holds at most the kept last one's copy, and the gradients are
    the plain model's."""
    width = 512
    copy_bytes = width * width * 2

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
                                     for _ in range(4)])

    x = torch.randn(2, 8, width)
    plain = model()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain(x).float().square().sum().backward()
    m = memtrain.Module(model(), budget=1 << 30, planner="all", sample=x)
    for _ in range(3):
        m.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            before = memtrain.memory_stats()["live_bytes"]
            y = m(x)
            held = memtrain.memory_stats()["live_bytes"] - before
            loss = y.float().square().sum()
        loss.backward()
        assert m.last_step["schedule"][:3] == ["Fck0", "Fck1", "Fck2"], m.last_step["schedule"]
        assert held < 2 * copy_bytes, f"the forward held {held} bytes; one block's weights in bfloat16 are {copy_bytes}"
        assert [digest(p.grad) for p in m.parameters()] == [digest(p.grad) for p in plain.parameters()]
