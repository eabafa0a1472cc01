"""Any nn.Module under a budget: its own forward runs, its blocks (called
with masks and keywords, returning tuples) are planned, and what it computes
is what the plain model computes, bit for bit."""


import pytest
import torch
import torch.nn.functional as F
from torch import nn

import memtrain
from exact import digest
from models import MaskedGPT, gpt2, llama, mixtral


def token_batches(lengths, rows=8, vocab=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (rows, t), generator=g) for t in lengths]


LENGTHS = [32, 48, 24, 64, 40, 56, 64, 32, 48, 60]


def lm_loss(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


def train_steps(model, batches, loss_of, seed=5, optimizer=None):
    """Losses, the digests of the gradients, and generator state after each step."""
    torch.manual_seed(seed)
    out = []
    for batch in batches:
        for p in model.parameters():
            p.grad = None
        loss = loss_of(model, batch)
        loss.backward()
        out.append((loss.detach(), [digest(p.grad) for p in model.parameters()], torch.get_rng_state()))
        if optimizer is not None:
            optimizer.step()
    return out


def check_steps(model, batches, loss_of, plain, seed=5):
    """Runs the steps train_steps ran on the plain model and checks each one
    as it ends (the budget counts what a test keeps, so nothing is kept).
    Returns each step's report."""
    torch.manual_seed(seed)
    names = [n for n, _ in model.named_parameters()]
    reports = []
    for step, (batch, (loss_plain, grads, rng)) in enumerate(zip(batches, plain)):
        for p in model.parameters():
            p.grad = None
        loss = loss_of(model, batch)
        loss.backward()
        assert torch.equal(loss_plain, loss.detach()), f"step {step}: loss {loss_plain} != {loss}"
        for name, a, p in zip(names, grads, model.parameters()):
            assert a == digest(p.grad), f"step {step}: gradient of {name} differs"
        assert torch.equal(rng, torch.get_rng_state()), f"step {step}: the generator is not where the plain model leaves it"
        reports.append(getattr(model, "_orig_mod", model).last_step)
    return reports


@pytest.mark.parametrize("planner", ["mimose", "optimal", "swap"])
def test_blocks_with_a_mask_and_a_tuple_are_exact(planner):
    batches = token_batches(LENGTHS)
    plain = train_steps(MaskedGPT(), batches, lambda m, ids: lm_loss(m(ids), ids))
    m = memtrain.Module(MaskedGPT(), budget="60%", planner=planner, sample=batches[3])
    reports = check_steps(m, batches, lambda m, ids: lm_loss(m(ids), ids), plain)
    planned = [r for r in reports if r["plan"] != "collect"]
    assert planned, "every step was a collection step"
    for r in planned:
        assert r["peak_bytes"] <= r["budget_bytes"], r
        assert r["input_shape"][0] == 8 and r["input_shape"][2] == 64  # block 0's input: batch x length x width
    # The budget made some steps keep less than everything.
    assert any(op.startswith(("Fck", "Fn", "OffS", "Off")) for r in planned for op in r["schedule"])


def hf_batches(lengths, vocab=500):
    g = torch.Generator().manual_seed(1)
    out = []
    for t in lengths:
        ids = torch.randint(0, vocab, (4, t), generator=g)
        mask = torch.ones(4, t, dtype=torch.long)
        mask[0, t // 2:] = 0  # a padded row
        out.append({"input_ids": ids, "attention_mask": mask, "labels": ids, "use_cache": False})
    return out


@pytest.mark.parametrize("make,budget", [(gpt2, "65%"), (llama, "75%"), (mixtral, "75%")])
def test_transformers_models_are_exact(make, budget):
    batches = hf_batches([32, 48, 24, 64, 40, 56])
    plain_model = make()
    plain_model.train()
    plain = train_steps(plain_model, batches, lambda m, b: m(**b).loss)
    m = memtrain.Module(make(), budget=budget, planner="optimal", sample=batches[3])
    m.train()
    assert sorted(m.state_dict()) == sorted(plain_model.state_dict())
    check_steps(m, batches, lambda m, b: m(**b).loss, plain)
    assert m.last_step["plan"] != "collect"
    assert m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]


def test_outputs_transformers_records_inside_the_blocks_are_refused_by_name():
    """A mixture of experts' router logits (output_router_logits, for its
    load-balancing loss) are recorded by hooks inside the blocks: memtrain
    could not hand their gradients on, and refuses by name rather than
    train without them or fail in the backward; with a sample, when the
    Module is made, and the model is left as it was."""
    batches = hf_batches([32, 48])
    model = mixtral(router_logits=True)
    with pytest.raises(memtrain.UsageError, match=r"block 0 \(MixtralDecoderLayer\) runs while transformers "
                                                  r"records its router_logits .*output_router_logits"):
        memtrain.Module(model, budget="100%", sample=batches[1])
    m = memtrain.Module(model, budget="64MiB")
    with pytest.raises(memtrain.UsageError, match="records its router_logits"):
        m(**batches[0])
    m(**batches[0], output_router_logits=False).loss.backward()


def test_resnet50_is_exact_and_its_batch_norm_statistics_too():
    torchvision = pytest.importorskip("torchvision")

    def make():
        torch.manual_seed(0)
        return torchvision.models.resnet50(num_classes=10)

    def blocks(model):
        return [*model.layer1, *model.layer2, *model.layer3, *model.layer4]

    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(n, 3, s, s, generator=g), torch.randint(0, 10, (n,), generator=g))
               for n, s in [(2, 64), (2, 96), (2, 80), (2, 128), (2, 112), (2, 128)]]
    plain_model = make()
    plain = train_steps(plain_model, batches, lambda m, b: F.cross_entropy(m(b[0]), b[1]))
    buffers = [(name, digest(b)) for name, b in plain_model.named_buffers()]
    del plain_model  # its 100 MB of weights would count against the budget
    model = make()
    # The weights and their gradients are most of this step's memory: 92%
    # of the peak (of the plain step in fp32 or bf16, the larger) holds too
    # few of its activations, and blocks are recomputed.
    m = memtrain.Module(model, budget="92%", blocks=blocks(model), planner="mimose", sample=batches[3][0],
                        collect_steps=2)
    reports = check_steps(m, batches, lambda m, b: F.cross_entropy(m(b[0]), b[1]), plain)
    for (name, a), b in zip(buffers, m.buffers()):
        assert a == digest(b), f"buffer {name} differs"
    assert any(op.startswith("Fck") for op in reports[-1]["schedule"])
    assert reports[-1]["peak_bytes"] <= reports[-1]["budget_bytes"]


def test_optimizers_gradient_accumulation_and_autocast():
    batches = token_batches([24, 40, 32, 48, 40, 24], rows=4)

    def with_adam_state(model):
        # Adam's state allocated before the budget is measured (a step on
        # zero gradients moves nothing): the budget is of the whole step.
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        return opt

    def accumulate(model, opt):
        torch.manual_seed(7)
        losses = []
        for k in range(0, len(batches), 2):
            opt.zero_grad(set_to_none=True)
            for ids in batches[k:k + 2]:  # two forwards and backwards per optimizer step
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = lm_loss(model(ids), ids)
                loss.backward()
                losses.append(loss.detach())
            opt.step()
        return losses

    plain = MaskedGPT(layers=4)
    l1 = accumulate(plain, with_adam_state(plain))
    model = MaskedGPT(layers=4)
    opt = with_adam_state(model)
    m = memtrain.Module(model, budget="70%", planner="optimal", sample=batches[3], collect_steps=1)
    l2 = accumulate(m, opt)
    assert all(torch.equal(a, b) for a, b in zip(l1, l2))
    assert l2[0].dtype == torch.float32 and m.last_step["plan"] != "collect"
    for (name, p), q in zip(plain.named_parameters(), m.parameters()):
        assert torch.equal(p, q), f"{name} differs after Adam"


def test_inference_eval_and_state_dict():
    model = MaskedGPT(layers=3)
    plain = MaskedGPT(layers=3, seed=1)
    plain.load_state_dict(model.state_dict())
    m = memtrain.Module(model, budget="1GiB")
    ids = token_batches([20], rows=2)[0]
    m.eval()
    plain.eval()
    assert not model.training and not any(b.training for b in model.blocks)
    with torch.no_grad():
        assert torch.equal(m(ids), plain(ids))
    assert m.last_step is None  # inference is not a step
    assert torch.equal(m(ids), plain(ids))  # eval with grad: a planned step without dropout
    state = m.state_dict()
    assert list(state) == list(plain.state_dict())
    other = MaskedGPT(layers=3, seed=2)
    other.load_state_dict(state)
    m.load_state_dict(MaskedGPT(layers=3, seed=3).state_dict())
    assert torch.equal(m.head.weight, MaskedGPT(layers=3, seed=3).head.weight)


def test_mispredicted_steps_are_retried_exactly():
    # A chain that claims 40% of the activation memory makes plans that run
    # out in the forward or the backward; each such step runs again under a
    # stricter plan and still computes what the plain model does.
    batches = token_batches(LENGTHS)
    plain = train_steps(MaskedGPT(), batches, lambda m, ids: lm_loss(m(ids), ids))
    m = memtrain.Module(MaskedGPT(), budget="60%", planner="optimal", sample=batches[3], _prediction_scale=0.4)
    reports = check_steps(m, batches, lambda m, ids: lm_loss(m(ids), ids), plain)
    assert sum(r["retries"] for r in reports) > 0


class TwoStacks(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.b = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        for layer in self.a:
            x = layer(x)
        for layer in self.b:
            x = torch.tanh(layer(x))
        return x


def test_blocks_found_or_refused_by_name():
    with pytest.raises(memtrain.UsageError, match=r"ambiguous: a \(3 x Linear\), b \(3 x Linear\); pass blocks="):
        memtrain.Module(TwoStacks(), budget="1GiB")
    with pytest.raises(memtrain.UsageError, match="found no blocks in Linear"):
        memtrain.Module(nn.Linear(4, 4), budget="1GiB")
    model = TwoStacks()
    with pytest.raises(memtrain.UsageError, match="block 1 .* is not a submodule of the model"):
        memtrain.Module(model, budget="1GiB", blocks=[model.a[0], nn.Linear(8, 8)])
    model = MaskedGPT(layers=2)
    found = memtrain.Module(model, budget="1GiB")
    assert found.planned_blocks == list(model.blocks)
    assert found.blocks is model.blocks  # the model's own name, not hidden


def test_blocks_not_called_one_after_another_are_refused():
    model = TwoStacks()
    # The tanh between b's layers: b[1]'s input is not what b[0] returned.
    m = memtrain.Module(model, budget="1GiB", blocks=model.b)
    with pytest.raises(memtrain.UsageError, match=r"block 1 \(Linear\)'s input is not what block 0 returned \(the "
                                                  "model's code between the two replaced it"):
        m(torch.randn(2, 8, requires_grad=True))
    # a's layers are called one after another: planned, and exact.
    model = TwoStacks()
    plain = TwoStacks()
    plain.load_state_dict(model.state_dict())
    m = memtrain.Module(model, budget="1GiB", blocks=model.a)
    x = torch.randn(2, 8, requires_grad=True)
    m(x).sum().backward()
    plain(x.detach().requires_grad_()).sum().backward()
    for p, q in zip(plain.parameters(), m.parameters()):
        assert torch.equal(p.grad, q.grad)


class Adds(nn.Module):
    def forward(self, x, bias):
        return x + bias


class WithLearnedBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(8))
        self.layers = nn.ModuleList([Adds(), Adds()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, self.bias)
        return x


def test_an_argument_that_needs_a_gradient_is_refused():
    m = memtrain.Module(WithLearnedBias(), budget="1GiB")
    with pytest.raises(memtrain.UsageError, match="block 0 .* other than its input that needs a gradient"):
        m(torch.randn(2, 8))


def compiled_blocks(model):
    # aot_eager: torch.compile's graph capture and AOT autograd without
    # inductor's C++ build, which would take a minute here.
    for i, block in enumerate(model.blocks):
        model.blocks[i] = torch.compile(block, backend="aot_eager", dynamic=True)
    return model


def test_compiled_blocks_run_inside_memtrain_exactly():
    batches = token_batches([32, 48, 24, 64, 40, 56])
    plain = train_steps(compiled_blocks(MaskedGPT(layers=4)), batches, lambda m, ids: lm_loss(m(ids), ids))
    m = memtrain.Module(compiled_blocks(MaskedGPT(layers=4)), budget="60%", planner="optimal", sample=batches[3])
    assert all(type(b).__name__ == "OptimizedModule" for b in m.blocks)
    reports = check_steps(m, batches, lambda m, ids: lm_loss(m(ids), ids), plain)
    assert any(op.startswith(("Fck", "Fn")) for r in reports[4:] for op in r["schedule"])


def test_the_whole_wrapped_model_under_torch_compile_is_refused():
    batches = token_batches([32])
    m = memtrain.Module(MaskedGPT(layers=2), budget="1GiB")
    with pytest.raises(memtrain.UsageError, match="compile the blocks themselves before wrapping"):
        torch.compile(m, backend="aot_eager")(batches[0])
    with pytest.raises(memtrain.UsageError, match="compile the blocks themselves before wrapping"):
        m.compile()
    torch._dynamo.reset()
    lm_loss(m(batches[0]), batches[0]).backward()  # and the module runs on, uncompiled
    assert m.last_step["step"] == 1


class Skipping(nn.Module):
    """Three layers, the middle one skipped where `skip` (as LayerDrop skips)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
        self.skip = False

    def forward(self, x):
        for k, layer in enumerate(self.layers):
            if not (self.skip and k == 1):
                x = layer(x)
        return x


@pytest.mark.parametrize("change, words", [
    ("forward hook", r"block 2 \(Linear\)'s input is not what block 1 returned \(block 1's forward hook "
                     r"replace_output \(.*test_any_model.py:\d+\) may have replaced it"),
    ("forward pre-hook", r"block 1 \(Linear\)'s input is not what block 0 returned \(block 1's forward pre-hook "
                         r"replace_input .* may have replaced it"),
    ("a skipped layer", r"block 2 was called before block 1 \(the forward skipped it, as LayerDrop skips layers\)"),
    ("a forward replaced", r"block 2 \(Linear\)'s input is not what block 1 returned \(block 1's forward was "
                           r"replaced after wrapping, block.forward = \.\.\..*patch the forward before wrapping"),
])
def test_what_replaced_a_blocks_input_is_named(change, words):
    """A hook that returns a new tensor between two blocks, or a layer the
    forward skips: the refusal names the hook, with where it is defined,
    or the skip."""
    model = Skipping()
    m = memtrain.Module(model, budget="1GiB", blocks=model.layers)

    def replace_output(module, args, output):
        return output * 2

    def replace_input(module, args):
        return (args[0] * 2,)
    if change == "forward hook":
        model.layers[1].register_forward_hook(replace_output)
    elif change == "forward pre-hook":
        model.layers[1].register_forward_pre_hook(replace_input)
    elif change == "a forward replaced":
        memtrains = model.layers[1].forward
        model.layers[1].forward = lambda x: memtrains(x) * 2  # a patch made after wrapping
    else:
        model.skip = True
    with pytest.raises(memtrain.UsageError, match=words):
        m(torch.randn(2, 8, requires_grad=True))
