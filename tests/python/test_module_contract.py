"""memtrain.Module keeps the contract of a torch module: copies are
independent, what autograd calls memtrain cannot honour are refused by name,
and bad arguments are refused naming the argument and what is valid."""

import copy
import gc
import io
import pickle

import pytest
import torch
import torch.nn.functional as F

import memtrain
from exact import digest
from models import MaskedGPT


def batch(length=24, rows=4, seed=0):
    return torch.randint(0, 300, (rows, length), generator=torch.Generator().manual_seed(seed))


def lm_loss(logits, ids):
    return F.cross_entropy(logits.flatten(0, 1), ids.flatten())


def wrapped(**kwargs):
    # In bytes, with room for a second model: the budget counts every tensor of the process.
    return memtrain.Module(MaskedGPT(layers=4), budget="64MiB", sample=batch(32), **kwargs)


def test_a_deep_copy_trains_itself_and_never_the_original():
    m = wrapped()
    ema = copy.deepcopy(m)
    assert isinstance(ema, memtrain.Module) and ema.budget_bytes == m.budget_bytes
    assert all(p is not q for p, q in zip(m.parameters(), ema.parameters()))
    plain = MaskedGPT(layers=4)
    for step in range(6):
        ids = batch(16 + 4 * step, seed=step)
        for model in (plain, ema):
            model.zero_grad(set_to_none=True)
            torch.manual_seed(step)
            lm_loss(model(ids), ids).backward()
        assert all(p.grad is None for p in m.parameters()), "the copy's step reached the original"
        for (name, p), q in zip(plain.named_parameters(), ema.parameters()):
            assert torch.equal(p.grad, q.grad), f"step {step}: {name}"
    assert ema.last_step["step"] == 6 and m.last_step is None


def test_shallow_copies_and_pickles_are_refused_by_name():
    m = wrapped()
    with pytest.raises(memtrain.UsageError, match="copy.copy of a memtrain.Module"):
        copy.copy(m)
    with pytest.raises(memtrain.UsageError, match="not picklable.*state_dict"):
        pickle.dumps(m)


def test_wrapping_a_model_twice_is_refused():
    model = MaskedGPT(layers=4)
    m = memtrain.Module(model, budget="70%", sample=batch(32))
    with pytest.raises(memtrain.UsageError, match="wrapped by a memtrain.Module already.*m.unwrap"):
        memtrain.Module(model, budget="70%", sample=batch(32))
    assert m.last_step is None


def plain_grads(model, ids):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    lm_loss(model(ids), ids).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("how", ["refused", "least_budget", "unwrapped", "module-gone"])
def test_a_model_is_wrapped_again_after_a_refusal_an_unwrap_or_its_module_going(how):
    """After memtrain.Infeasible at construction (to retry with its least),
    after memtrain.least_budget(), after m.unwrap(), and after the Module is
    gone, the model is the plain model again: it trains as before, and
    wrapping it again works (at the least stated)."""
    model = MaskedGPT(layers=4)
    ids = batch(32)
    before = plain_grads(model, ids)
    if how == "least_budget":
        budget = memtrain.least_budget(model, ids)
        with pytest.raises(memtrain.Infeasible):
            memtrain.Module(model, budget=budget // 2, sample=ids)
        gc.collect()
    elif how == "refused":
        with pytest.raises(memtrain.Infeasible) as refused:
            memtrain.Module(model, budget=1, sample=ids)
        budget = refused.value.min_bytes
        del refused  # its traceback holds the refused Module, as a loop's `except` would not
        gc.collect()
    else:
        m = memtrain.Module(model, budget="64MiB", sample=ids)
        plain_grads(m, ids)
        if how == "unwrapped":
            assert m.unwrap() is model
            with pytest.raises(memtrain.UsageError, match="unwrapped"):
                m(ids)
        del m
        gc.collect()
        budget = "64MiB"
    assert all(torch.equal(a, b) for a, b in zip(before, plain_grads(model, ids)))
    again = memtrain.Module(model, budget=budget, sample=ids)
    assert all(torch.equal(a, b) for a, b in zip(before, plain_grads(again, ids)))
    assert again.last_step["step"] == 1


@pytest.mark.parametrize("with_optimizer", [False, True], ids=["no-optimizer", "optimizer"])
def test_the_least_a_refusal_states_is_accepted_inside_its_except(with_optimizer):
    """The retry loops write: the refused Module's measurement is let go
    though the error (and its traceback) is still alive."""
    model = MaskedGPT(layers=4)
    opt = torch.optim.AdamW(model.parameters()) if with_optimizer else None
    sample = batch(32)
    try:
        memtrain.Module(model, budget=1, sample=sample, optimizer=opt)
    except memtrain.Infeasible as e:
        m = memtrain.Module(model, budget=e.min_bytes, sample=sample, optimizer=opt)
    assert m.budget_bytes > 0


def test_a_deep_copy_or_a_save_of_the_wrapped_model_is_the_plain_model():
    """copy.deepcopy(model) of a model a Module wraps (an EMA or teacher
    copy) is a plain model of its own: its steps reach neither the original
    nor memtrain. torch.save(model) saves the plain model."""
    model = MaskedGPT(layers=4)
    m = memtrain.Module(model, budget="64MiB", sample=batch(32))
    ids = batch(24, seed=1)
    teacher = copy.deepcopy(model)
    assert all(torch.equal(a, b) for a, b in zip(plain_grads(teacher, ids), plain_grads(MaskedGPT(layers=4), ids)))
    assert all(p.grad is None for p in model.parameters()), "the copy's step reached the original"
    assert m.last_step is None, "the copy's step ran through memtrain"
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert all(torch.equal(a, b) for a, b in zip(plain_grads(loaded, ids), plain_grads(MaskedGPT(layers=4), ids)))
    assert m.last_step is None


@pytest.mark.parametrize("call", ["grad", "grad_unused", "grad_of_some", "backward_inputs", "backward_accumulates"])
def test_autograd_gets_the_plain_models_gradients(call):
    """torch.autograd.grad returns the plain model's gradients and leaves
    .grad alone; backward(inputs=...) fills only those inputs' .grad; a
    backward onto gradients already there adds to them, as on the plain model."""
    plain = MaskedGPT(layers=4)
    m = wrapped()
    results = []
    for model in (plain, m):
        ids = batch(seed=5)
        params = list(model.parameters())
        block_params = list(model.blocks[2].parameters())
        before = [torch.full_like(p, 0.25) for p in params]
        for p, g in zip(params, before):
            p.grad = g.clone()
        torch.manual_seed(3)
        loss = lm_loss(model(ids), ids)
        if call == "grad":
            got = list(torch.autograd.grad(loss, params))
        elif call == "grad_unused":
            got = list(torch.autograd.grad(loss, params, allow_unused=True))
        elif call == "grad_of_some":
            got = list(torch.autograd.grad(loss, block_params))
        elif call == "backward_inputs":
            loss.backward(inputs=block_params)
            got = [p.grad for p in params]
        else:
            loss.backward()
            got = [p.grad for p in params]
        if call.startswith("grad"):
            assert all(torch.equal(p.grad, g) for p, g in zip(params, before)), ".grad changed"
        if call == "backward_inputs":
            inside = {id(p) for p in block_params}
            assert all(torch.equal(p.grad, g) for p, g in zip(params, before) if id(p) not in inside)
        results.append(got)
    names = [n for n, _ in plain.named_parameters()]
    if call == "grad_of_some":
        names = [n for n, _ in plain.blocks[2].named_parameters()]
    assert len(results[0]) == len(results[1]) == len(names)
    for name, a, b in zip(names, *results):
        assert a is not None and b is not None, name
        assert torch.equal(a, b), name


def test_a_gradient_of_a_gradient_is_refused_by_name():
    m = wrapped()
    ids = batch()
    loss = lm_loss(m(ids), ids)
    with pytest.raises(RuntimeError, match="create_graph=True.*memtrain.Module's blocks"):
        loss.backward(create_graph=True)


def test_a_gradient_penalty_through_the_input_only_is_exact():
    """autograd.grad of the loss with respect to the blocks' input alone
    (an input-gradient penalty, an influence score): the plain model's."""
    plain = MaskedGPT(layers=4)
    m = wrapped()
    got = []
    for model in (plain, m):
        ids = batch(seed=9)
        torch.manual_seed(1)
        x = model.embed(ids).detach().requires_grad_(True)
        length = ids.shape[1]
        mask = torch.triu(torch.full((length, length), float("-inf")), 1)
        h = x
        for block in model.blocks:
            h, _ = block(h, mask, scale=0.5)
        loss = lm_loss(model.head(model.norm(h)), ids)
        (dx,) = torch.autograd.grad(loss, [x])
        got.append(dx)
        assert all(p.grad is None for p in model.parameters())
    assert torch.equal(*got)


def test_two_backwards_of_one_forward_accumulate_as_on_the_plain_model():
    plain = MaskedGPT(layers=4)
    m = wrapped()
    grads, streams = [], []
    for model in (plain, m):
        model.zero_grad(set_to_none=True)
        ids = batch(seed=3)
        torch.manual_seed(11)
        out = model(ids)
        lm_loss(out, ids).backward(retain_graph=True)  # two losses of one forward, a backward each
        out.square().mean().backward(retain_graph=True)
        lm_loss(out, ids).backward()
        grads.append([p.grad for p in model.parameters()])
        streams.append(torch.get_rng_state())  # memtrain's forward run again draws nothing of the caller's
    for (name, _), a, b in zip(plain.named_parameters(), *grads):
        assert torch.equal(a, b), name
    assert torch.equal(*streams)
    assert m.last_step["step"] == 1  # one step, reported once


def test_an_early_exit_says_what_happened():
    m = wrapped()
    ids = batch()

    def early_exit(model, ids):  # layer drop: only the first two blocks
        length = ids.shape[1]
        mask = torch.triu(torch.full((length, length), float("-inf")), 1)
        x = model.embed(ids)
        for block in list(model.blocks)[:2]:
            x, _ = block(x, mask)
        return model.head(model.norm(x))
    with pytest.raises(RuntimeError, match="called blocks 0..1 of 4"):
        lm_loss(early_exit(m, ids), ids).backward()


@pytest.mark.parametrize("kwargs,words", [
    ({"planner": ""}, "planner '' is not known"),
    ({"planner": 3}, "planner 3 is not a planner's name"),
    ({"collect_steps": "a"}, "collect_steps 'a' is not a number of steps"),
    ({"budget": 2**70}, "is out of range; expected 1..2\\*\\*62"),
    ({"budget": "1.5"}, "not a whole number"),
    ({"sample": None}, "budget '70%' is a share of the peak of a step of the sample .* no sample was given"),
    ({"sample": torch.empty(4, 32, dtype=torch.long, device="meta")},
     "sample holds a tensor on meta .* give a sample of real tensors on cpu"),
    ({"budget": "1000TiB"}, "budget 1024000.0 GiB .* is more than cpu has"),
    ({"optimizer": torch.optim.SGD([torch.zeros(3, requires_grad=True)], lr=0.1)},
     "optimizer= updates 1 tensor that is not this model's parameters \\(the first of shape \\(3,\\)\\)"),
    ({"blocks": "the model"}, "block 0 is the whole model \\(MaskedGPT\\)"),
])
def test_bad_arguments_name_themselves(kwargs, words):
    """Refused at construction, where a step would refuse them later or
    never: what was given and what would be valid. The model is left as it
    was, to wrap again."""
    model = MaskedGPT(layers=4)
    args = {"budget": "70%", "sample": batch(32), **kwargs}
    if args["sample"] is None:
        del args["sample"]
    if args.get("blocks") == "the model":
        args["blocks"] = [model]
    with pytest.raises(memtrain.UsageError, match=words):
        memtrain.Module(model, **args)
    memtrain.Module(model, budget="64MiB", sample=batch(32))


def test_apply_reaches_the_model_itself():
    m = wrapped()
    seen = []
    assert m.apply(lambda module: seen.append(type(module).__name__)) is m
    assert seen[-1] == "MaskedGPT" and "MaskedBlock" in seen


@pytest.mark.parametrize("switch", ["model", "module"])
def test_the_mode_is_the_models_whichever_switches_it(switch):
    """model.eval() on the model itself, or m.eval(): m.training, the
    model's and its blocks' all say so, and train() undoes it."""
    m = wrapped()
    model = m._model
    (model if switch == "model" else m).eval()
    assert (m.training, model.training, model.blocks[0].training) == (False, False, False)
    (model if switch == "model" else m).train()
    assert (m.training, model.training, model.blocks[0].training) == (True, True, True)


class DrawsFromItsOwnGenerator(torch.nn.Module):
    """A block's dropout drawn from a generator the block owns."""

    def __init__(self, block):
        super().__init__()
        self.block = block
        self.generator = torch.Generator().manual_seed(11)

    def forward(self, x, *args, **kwargs):
        y = self.block(x, *args, **kwargs)
        out = y[0] if isinstance(y, tuple) else y
        keep = (torch.rand(out.shape, generator=self.generator) > 0.1).to(out.dtype)
        return (out * keep,) + tuple(y[1:]) if isinstance(y, tuple) else out * keep


def test_measuring_the_sample_leaves_the_models_own_generators_as_they_were():
    model = MaskedGPT(layers=4)
    for i in range(len(model.blocks)):
        model.blocks[i] = DrawsFromItsOwnGenerator(model.blocks[i])
    states = [b.generator.get_state() for b in model.blocks]
    memtrain.Module(model, budget="100%", sample=batch(32))
    assert all(torch.equal(a, b.generator.get_state()) for a, b in zip(states, model.blocks))


def test_a_frozen_model_and_an_empty_sample_are_refused_by_name():
    frozen = MaskedGPT(layers=4).requires_grad_(False)
    with pytest.raises(memtrain.UsageError, match="every parameter of MaskedGPT is frozen"):
        memtrain.Module(frozen, budget="70%", sample=batch(32))
    trunk_frozen = MaskedGPT(layers=4)  # only the head trains: the blocks keep nothing
    trunk_frozen.embed.requires_grad_(False)
    trunk_frozen.blocks.requires_grad_(False)
    with pytest.raises(memtrain.UsageError, match="no block of MaskedGPT gets a gradient.*unfreeze a block"):
        memtrain.Module(trunk_frozen, budget="70%", sample=batch(32))
    with pytest.raises(memtrain.UsageError, match="sample holds an empty tensor"):
        memtrain.Module(MaskedGPT(layers=4), budget="70%", sample=batch(0))


def test_a_step_that_cannot_run_ends_and_leaves_the_process_unbudgeted():
    m = memtrain.Module(MaskedGPT(layers=4), budget="1MiB")  # no sample: the first step finds out
    ids = batch()
    with pytest.raises(memtrain.Error, match="does not fit the budget"):
        m(ids)
    big = torch.zeros(4 << 20)  # 16 MiB outside a step: never refused
    assert big.numel() == 4 << 20


@pytest.mark.parametrize("sparse_layout", [False, True], ids=["dense-embedding", "sparse-embedding"])
def test_an_embedding_with_sparse_gradients_trains_as_on_the_plain_model(sparse_layout):
    """nn.Embedding(sparse=True) gives a sparse gradient, counted by its
    indices and values; SGD steps on it as on the plain model."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.emb = torch.nn.Embedding(300, 64, sparse=sparse_layout)
            self.blocks = torch.nn.ModuleList(
                [torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU()) for _ in range(3)])
            self.head = torch.nn.Linear(64, 300)

        def forward(self, ids):
            h = self.emb(ids)
            for block in self.blocks:
                h = block(h)
            return self.head(h)

    def train(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(5):
            ids = batch(8 + 4 * step, seed=step)
            loss = lm_loss(model(ids), ids)
            opt.zero_grad()
            loss.backward()
            assert model.emb.weight.grad.is_sparse == sparse_layout
            opt.step()
        return [p.detach().clone() for p in model.parameters()]

    plain = train(Net())
    model = Net()
    m = memtrain.Module(model, budget="100%", blocks=list(model.blocks), sample=batch(24))
    got = train(m)
    assert all(torch.equal(a, b) for a, b in zip(plain, got))
    assert m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]


FROZEN = {
    "embeddings": lambda model: [model.embed],
    "block 0": lambda model: [model.blocks[0]],
    "embeddings and block 0": lambda model: [model.embed, model.blocks[0]],
    "embeddings and blocks 0-2": lambda model: [model.embed, *model.blocks[:3]],
}


@pytest.mark.parametrize("budget", ["least", "100%"])
@pytest.mark.parametrize("frozen", list(FROZEN))
def test_frozen_embeddings_and_first_blocks_train_as_on_the_plain_model(frozen, budget):
    """A frozen prefix (the embeddings, the first blocks, or both, as
    fine-tuning does): nothing before the first block that trains gets a
    gradient, the step ends with that block's backward, and every step's
    gradients equal the plain model's, within the budget, at the least
    budget (blocks recomputed) and at "100%"."""
    def model():
        net = MaskedGPT(layers=4)
        for part in FROZEN[frozen](net):
            part.requires_grad_(False)
        return net

    def steps(net):
        for step in range(4):
            ids = batch(16 + 5 * step, seed=step)
            net.zero_grad(set_to_none=True)
            torch.manual_seed(step)
            memtrain.reset_peak()
            lm_loss(net(ids), ids).backward()
            yield step, [None if p.grad is None else digest(p.grad) for p in net.parameters()]

    plain = [grads for _, grads in steps(model())]
    gc.collect()
    net, sample = model(), batch(32)
    try:
        m = memtrain.Module(net, budget=1 if budget == "least" else budget, sample=sample)
    except memtrain.Infeasible as refused:
        m = memtrain.Module(net, budget=refused.min_bytes, sample=sample)
    names = [name for name, _ in net.named_parameters()]
    for step, grads in steps(m):
        assert m.last_step["step"] == step + 1, m.last_step
        assert memtrain.memory_stats()["peak_bytes"] <= m.budget_bytes
        for name, a, b in zip(names, plain[step], grads):
            assert a == b, f"step {step}: {name}"


@pytest.mark.parametrize("part, words", [
    (lambda model: [model.lm_head], "block 0 \\(Linear\\) is the model's output head"),
    (lambda model: [model.model.embed_tokens], "block 0 \\(Embedding\\) is the model's input embeddings"),
    (lambda model: [model.model], "block 0 \\(LlamaModel\\) holds the model's input embeddings"),
    (lambda model: list(model.model.layers) + [model.lm_head], "block 4 \\(Linear\\) is the model's output head"),
], ids=["head", "embeddings", "trunk", "layers-and-head"])
def test_blocks_that_are_the_models_head_or_embeddings_are_refused_by_name(part, words):
    """transformers names its models' ends: a block that is one, or holds
    one, is refused at construction, naming the blocks memtrain finds."""
    pytest.importorskip("transformers")
    from models import llama
    model = llama()
    ids = batch(16)
    with pytest.raises(memtrain.UsageError, match=words + ".*memtrain finds 4 in LlamaForCausalLM: model.layers.0 "
                                                          "\\.\\. model.layers.3"):
        memtrain.Module(model, budget="70%", blocks=part(model), sample=ids)


def _reads_of_hidden_states(reads, net, out, ids):
    """The loop's loss, and what else it reads of the hidden states'
    gradients: their .grad (retain_grad), a hook that scales one, or
    torch.autograd.grad of the loss by one."""
    states = out.hidden_states
    loss = out.logits.float().logsumexp(-1).mean()
    if reads == "hook":
        states[2].register_hook(lambda g: g * 0.5)  # a gradient reversal layer's kind of hook
    for k in (0, 2) if reads == "loss" else (2,):
        loss = loss + states[k].float().pow(2).mean()
    if reads == "retain_grad":
        states[1].retain_grad()
    if reads == "grad":
        params = [p for p in net.parameters() if p.requires_grad]
        return list(torch.autograd.grad(loss, [states[1]] + params))
    loss.backward()
    return [states[1].grad] if reads == "retain_grad" else []


@pytest.mark.parametrize("family, reads", [("llama", "loss"), ("llama", "retain_grad"), ("llama", "hook"),
                                           ("llama", "grad"), ("gpt2", "loss"), ("mixtral", "loss")])
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("collect_steps", [0, 10], ids=["kept", "recomputed"])
def test_a_loss_on_the_hidden_states_between_blocks_trains_as_the_plain_model(family, reads, autocast, collect_steps):
    """Distillation's loss on a hidden state between blocks (and on block
    0's input): its gradient there is the plain model's sum, in the plain
    model's order (the loss's part, then each use the next block makes),
    so every gradient is bit-equal, two steps running; and what reads those
    gradients (retain_grad, a hook, autograd.grad) sees the plain model's."""
    pytest.importorskip("transformers")
    import models
    family = getattr(models, family)

    def run(net):
        seen = []
        for step in range(2):
            ids = batch(16 + 4 * step, rows=2, seed=step)
            torch.manual_seed(1)  # the same attention dropout
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = net(input_ids=ids, output_hidden_states=True)
            read = _reads_of_hidden_states(reads, net, out, ids)
            seen.append([digest(t) for t in read] + [digest(p.grad) for p in net.parameters()])
            net.zero_grad(set_to_none=True)
        return seen

    plain = run(family(layers=3))
    m = memtrain.Module(family(layers=3), budget="100%", sample={"input_ids": batch(20, rows=2)},
                        chunked_loss=False, collect_steps=collect_steps)
    assert run(m) == plain


def test_a_loss_on_a_hidden_state_is_bit_equal_from_the_first_step_without_a_sample():
    """No sample measured the blocks: their first step does not know how
    often each uses its input, and its pieces still go one by one."""
    pytest.importorskip("transformers")
    from models import llama

    def run(net):
        seen = []
        for step in range(2):
            ids = batch(16 + 4 * step, rows=2, seed=step)
            torch.manual_seed(1)
            out = net(input_ids=ids, output_hidden_states=True)
            (out.logits.float().logsumexp(-1).mean() + out.hidden_states[2].pow(2).mean()).backward()
            seen.append([digest(p.grad) for p in net.parameters()])
            net.zero_grad(set_to_none=True)
        return seen

    plain = run(llama(layers=3))
    assert run(memtrain.Module(llama(layers=3), budget="1GiB", chunked_loss=False)) == plain


@pytest.mark.parametrize("retained", [False, True], ids=["let-go", "retained"])
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16"])
def test_a_finished_backward_holds_no_tensor_of_its_step_the_plain_model_lets_go(autocast, retained):
    """After loss.backward(), with the loss (and so its graph) still alive as
    a loop keeps it until its next forward, the step's tensors before the
    blocks (the embeddings' output, the rotary tables every layer took) are
    let go as the plain model lets them go, and kept where the graph is
    retained; a second backward of a retained graph then adds the same
    gradients as the plain model's."""
    from torch.multiprocessing.reductions import StorageWeakRef

    from models import llama

    def run(model):
        seen = []

        def watch(module, args, output):
            for t in (output if isinstance(output, tuple) else (output,)):
                seen.append(StorageWeakRef(t.untyped_storage()))
        hooks = [model.model.embed_tokens.register_forward_hook(watch),
                 model.model.rotary_emb.register_forward_hook(watch)]
        ids = torch.randint(0, 500, (2, 40), generator=torch.Generator().manual_seed(3))
        torch.manual_seed(1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward(retain_graph=retained)
        alive = [not s.expired() for s in seen]
        if retained:
            torch.manual_seed(1)
            (2 * loss).backward()
        for h in hooks:
            h.remove()
        return alive, [p.grad.clone() for p in model.parameters()]

    sample = {"input_ids": torch.randint(0, 500, (2, 64)), "labels": torch.randint(0, 500, (2, 64))}
    plain_alive, plain_grads = run(llama(layers=3))
    m = memtrain.Module(llama(layers=3), budget="96MiB", sample=sample, chunked_loss=False)
    for _ in range(2):  # a collection step, then a planned one
        m.zero_grad(set_to_none=True)
        alive, grads = run(m)
        assert len(alive) == len(plain_alive) == 3
        assert alive == plain_alive == [retained] * 3
        assert all(torch.equal(a, b) for a, b in zip(grads, plain_grads))
