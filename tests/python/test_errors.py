"""Errors a Python user understands: memtrain's own as Python exceptions
with the C++ message, bad arguments refused naming what was wrong."""

import pytest
import torch
from torch import nn

import memtrain
from models import mlp


def test_exception_hierarchy():
    assert issubclass(memtrain.Error, RuntimeError)
    assert issubclass(memtrain.UsageError, memtrain.Error) and issubclass(memtrain.UsageError, ValueError)
    assert issubclass(memtrain.OutOfBudget, memtrain.Error)
    assert issubclass(memtrain.Infeasible, memtrain.Error)


def test_stage_that_is_not_a_module():
    with pytest.raises(TypeError, match="stage 1 is a function, not a torch.nn.Module"):
        memtrain.Module([nn.Linear(4, 4), lambda x: x], budget="1GiB")


def test_a_model_that_is_not_a_module():
    with pytest.raises(TypeError, match="a model of type int is not a model; expected a torch.nn.Module"):
        memtrain.Module(3, budget="1GiB")


@pytest.mark.parametrize("budget,words", [("lots", "budget"), ("150%", "budget"), (-5, "out of range; expected 1"),
                                          (1.5, "type float")])
def test_budget_that_does_not_parse(budget, words):
    with pytest.raises(memtrain.UsageError, match=words):
        memtrain.Module(mlp(), budget=budget)


def test_percent_budget_needs_a_sample():
    with pytest.raises(memtrain.UsageError, match="budget '50%' is a share .* no sample was given: give sample="):
        memtrain.Module(mlp(), budget="50%")
    m = memtrain.Module(mlp(), budget="1GiB")
    with pytest.raises(memtrain.UsageError, match="a budget of 50% is of the peak of a step of the largest input "
                                                  "that keeps everything, which is not measured yet; wrap the "
                                                  "model with a sample"):
        m.budget = "50%"


def test_unknown_planner_lists_the_known_ones():
    with pytest.raises(memtrain.UsageError, match="planner 'fastest' is not known; expected one of .*optimal"):
        memtrain.Module(mlp(), budget="1GiB", planner="fastest")


@pytest.mark.parametrize("autocast", [True, "bf16", torch.float32], ids=repr)
def test_autocast_that_is_not_a_precision_a_loop_runs_in(autocast):
    with pytest.raises(memtrain.UsageError, match=f"autocast {autocast!r} is not a precision the loop runs in; "
                                                  "expected None .* False .* torch.bfloat16 or torch.float16"):
        memtrain.Module(mlp(), budget="1GiB", autocast=autocast)


def test_input_on_another_device():
    m = memtrain.Module(mlp(), budget="1GiB")
    with pytest.raises(memtrain.UsageError, match="input is on meta"):
        m(torch.empty(8, 64, device="meta"))


def test_infeasible_budget_carries_the_least_budget():
    with pytest.raises(memtrain.Infeasible) as caught:
        memtrain.Module(mlp(), budget="20%", planner="optimal", sample=torch.randn(512, 64))
    assert caught.value.min_bytes > 0
    assert f"{caught.value.min_bytes / 2**20:.1f} MiB" in str(caught.value)


@pytest.mark.parametrize("rows,at_update", [(2, True), (4096, False)], ids=["update-bound", "activation-bound"])
def test_a_least_the_optimizers_update_sets_says_no_input_lowers_it(rows, at_update):
    """Where even the least-memory schedule peaks at the optimizer's update
    (a small input beside Adam's state), the refusal says a smaller input
    lowers it no further; where the blocks' memory sets it, it does not."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    with pytest.raises(memtrain.Infeasible) as caught:
        memtrain.Module(model, budget=1, planner="optimal", sample=torch.randn(rows, 64), optimizer=opt)
    said = "at its peak between steps (" in str(caught.value) and "the optimizer's update" in str(caught.value)
    assert said == at_update, str(caught.value)


class Raises(nn.Module):
    def forward(self, x):
        raise KeyError("a stage's own error")


def test_a_stages_python_exception_comes_back_unchanged():
    m = memtrain.Module([nn.Linear(64, 8), Raises()], budget="1GiB")
    with pytest.raises(KeyError, match="a stage's own error"):
        m(torch.randn(4, 64))
    # The module is still usable: the failed step left nothing running.
    m2 = memtrain.Module([nn.Linear(64, 8), nn.ReLU()], budget="1GiB")
    m2(torch.randn(4, 64)).sum().backward()


class HookedBlock(nn.Module):
    """A block whose backward runs a hook that raises `error`."""

    def __init__(self, error):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.error = error

    def forward(self, x):
        h = self.fc(x)
        if h.requires_grad:
            h.register_hook(self.fire)
        return torch.relu(h)

    def fire(self, grad):
        raise self.error


@pytest.mark.parametrize("error", [ValueError("a hook's own error"), KeyboardInterrupt()], ids=type)
def test_an_exception_in_a_blocks_backward_comes_back_unchanged(error):
    """Raised by a hook inside a block's backward, which memtrain runs:
    the loop gets it as raised (Ctrl-C stays KeyboardInterrupt), and the
    next step trains."""
    blocks = [HookedBlock(error), HookedBlock(error)]
    m = memtrain.Module(blocks, budget="1GiB")
    with pytest.raises(type(error)) as raised:
        m(torch.randn(4, 64)).sum().backward()
    assert raised.value is error
    for b in blocks:
        b.fire = lambda grad: None
    m(torch.randn(4, 64)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())


class ReturnsTuple(nn.Module):
    def forward(self, x):
        return x, x


def test_a_stage_called_with_the_tuple_the_one_before_returned_is_refused_by_name():
    m = memtrain.Module([nn.Linear(64, 8), ReturnsTuple(), nn.ReLU()], budget="1GiB")
    with pytest.raises(memtrain.Error, match=r"block 2 \(ReLU\) was called without a tensor as its first argument"):
        m(torch.randn(4, 64).requires_grad_())


def test_backward_of_a_replaced_step():
    m = memtrain.Module(mlp(), budget="1GiB")
    first = m(torch.randn(4, 64)).sum()
    second = m(torch.randn(4, 64)).sum()
    second.backward()
    with pytest.raises(RuntimeError, match="a later forward replaced"):
        first.backward()


def test_dropped_output_abandons_the_step():
    m = memtrain.Module(mlp(), budget="1GiB")
    m(torch.randn(4, 64)).sum().backward()  # first use: the libraries' own caches
    before = memtrain.memory_stats()["live_bytes"]
    x = torch.randn(1024, 64)
    for _ in range(3):
        m(x)  # never backpropagated: each holds about 6 MiB of activations while running
    # What is left is at most a library's per-thread caches (256 KiB seen), not a step's 6 MiB.
    assert memtrain.memory_stats()["live_bytes"] - before < 1024 * 1024
    m(torch.randn(4, 64)).sum().backward()
    assert m.last_step["step"] == 5


def test_a_key_value_cache_passed_to_the_blocks_is_refused():
    from models import llama
    model = llama(layers=2)
    ids = torch.randint(0, 500, (2, 16))
    m = memtrain.Module(model, budget="1GiB", blocks=model.model.layers)
    with pytest.raises(memtrain.UsageError, match=r"block 0 \(LlamaDecoderLayer\) was called with a key-value cache "
                                                  r"\(DynamicCache\).*use_cache=False"):
        m(input_ids=ids, use_cache=True)
    loss = m(input_ids=ids, labels=ids, use_cache=False).loss  # without it, the step runs
    loss.backward()
    assert m.last_step is not None
