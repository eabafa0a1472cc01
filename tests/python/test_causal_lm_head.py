"""transformers' causal language models given labels, their head and loss
chunked by memtrain (chunked_loss): the loss and every gradient within the
chunked cross-entropy's tolerance of the plain model's, the whole logits
never held; unchunked, bit for bit the plain model's; and the least budget
lowered by what the logits held."""

import gc
import traceback
import warnings

import pytest
import torch

import memtrain

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

VOCAB = 32000
# As memtrain.linear_cross_entropy's (test_linear_cross_entropy.py): float32
# sums in another order, measured below 1e-6 of the largest gradient.
TOLERANCE = 1e-5


def gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=3, n_head=4)
    return transformers.GPT2LMHeadModel(config)  # its head's weight is the embeddings' (tied)


def llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(config)


def qwen2():
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return transformers.Qwen2ForCausalLM(config)


def batch(length=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (2, length), generator=g)
    labels = ids.clone()
    labels[1, length // 2:] = -100  # a padded row
    return {"input_ids": ids, "labels": labels}


def loss_and_grads(model, inputs, **kwargs):
    model.train()
    out = model(**inputs, **kwargs)
    out.loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return out, grads


@pytest.mark.parametrize("make", [gpt2, llama, qwen2])
def test_chunked_head_and_loss_are_within_tolerance_and_hold_no_logits(make):
    inputs = batch()
    plain, plain_grads = loss_and_grads(make(), inputs, num_items_in_batch=torch.tensor(80))
    gc.collect()
    m = memtrain.Module(make(), budget="100%", sample=inputs, chunked_loss=True)
    out, grads = loss_and_grads(m, inputs, num_items_in_batch=torch.tensor(80))
    # Never made whole, and nothing in their place: the hidden states the
    # head handed on are in neither the output's keys nor its tuple.
    assert "logits" not in out.keys() and not hasattr(out, "logits")
    assert not any(isinstance(t, torch.Tensor) and t.dim() == 3 for t in out.to_tuple())
    with pytest.raises(memtrain.UsageError, match="ran in chunks .* chunked_loss=False"):
        out.logits
    assert "loss=" in repr(out) and "logits" not in repr(out)
    # Made again field by field, as accelerate's convert_to_fp32 makes it: still without them.
    again = type(out)(**out)
    assert "logits" not in again.keys() and not hasattr(again, "logits")
    assert abs(out.loss.item() - plain.loss.item()) <= TOLERANCE * abs(plain.loss.item())
    for k, (a, b) in enumerate(zip(grads, plain_grads)):
        assert ((a - b).abs().max() / b.abs().max()).item() <= TOLERANCE, f"parameter {k}"
    assert m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]


def test_unchunked_the_models_own_head_and_loss_run_bit_for_bit():
    inputs = batch()
    plain, plain_grads = loss_and_grads(llama(), inputs)
    gc.collect()
    m = memtrain.Module(llama(), budget="100%", sample=inputs, chunked_loss=False)
    out, grads = loss_and_grads(m, inputs)
    assert torch.equal(out.loss, plain.loss) and torch.equal(out.logits, plain.logits)
    assert all(torch.equal(a, b) for a, b in zip(grads, plain_grads))


def test_chunking_lowers_the_least_budget_by_what_the_logits_held():
    inputs = batch(length=64)

    def least(chunked):
        gc.collect()
        return memtrain.least_budget(llama(), inputs, chunked_loss=chunked)

    plain, chunked = least(False), least(True)
    logits = 2 * 64 * VOCAB * 4
    assert chunked < plain - logits, (plain, chunked)


def test_chunked_loss_true_on_a_call_without_labels_says_its_head_ran_whole():
    """chunked_loss=True chunks the head and loss a model computes from
    labels: a call without them (the loop's own loss over the logits) is
    warned once, at the loop's line, and runs the model's own head."""
    inputs = batch()
    ids = inputs["input_ids"]
    plain = llama()(input_ids=ids).logits
    gc.collect()
    m = memtrain.Module(llama(), budget="100%", sample=inputs, chunked_loss=True)
    with pytest.warns(UserWarning, match="chunked_loss=True, but LlamaForCausalLM was called without labels") as seen:
        first = m(input_ids=ids).logits
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once
        m(input_ids=ids).logits.sum().backward()
    assert [w.filename for w in seen if "without labels" in str(w.message)] == [__file__]
    assert torch.equal(first, plain)


@pytest.mark.parametrize("chunked", [False, True], ids=["whole-head", "chunked-head"])
def test_a_refusal_offers_keeps_output_false_only_where_the_output_holds_logits(chunked):
    """Letting the output go saves its logits; a chunked head's output is
    its loss alone, four bytes not worth an option."""
    with pytest.raises(memtrain.Infeasible) as caught:
        memtrain.Module(llama(), budget=1, sample=batch(), chunked_loss=chunked)
    assert ("keeps_output=False" in str(caught.value)) == (not chunked), str(caught.value)


def test_chunked_loss_on_a_model_it_cannot_chunk_is_refused_by_name():
    from models import NanoGPT

    model = NanoGPT()
    with pytest.raises(memtrain.UsageError, match="chunked_loss=True: NanoGPT is not a transformers causal"):
        memtrain.Module(model, budget="1GiB", blocks=model.blocks, chunked_loss=True)
    with pytest.raises(memtrain.UsageError, match="chunked_loss 'yes' is not a choice"):
        memtrain.Module(llama(), budget="1GiB", chunked_loss="yes")


@pytest.mark.parametrize("share", [70, 65])
@pytest.mark.parametrize("chunked", [None, True], ids=["chunked-where-needed", "chunked-always"])
def test_n_percent_stays_of_the_plain_loops_step_with_the_head_chunked(chunked, share):
    """N% is of the plain loop's step, the model's own head and loss
    included, whether the head is chunked because N% cannot hold the whole
    logits or because chunks were asked for; and it grows with the loop's
    optimizer's state when that is counted, at its first update."""
    inputs = batch(length=64)
    gc.collect()
    plain = memtrain.Module(llama(), budget="100%", sample=inputs, chunked_loss=False).budget_bytes
    gc.collect()
    m = memtrain.Module(llama(), budget=f"{share}%", sample=inputs, chunked_loss=chunked)
    assert m.budget_bytes == pytest.approx(plain * share / 100, rel=1e-3), (m.budget_bytes, plain)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    before = m.budget_bytes
    for _ in range(2):
        m(**inputs).loss.backward()
        assert m.last_step["chunked_loss"]
        assert m.last_step["peak_bytes"] <= m.last_step["budget_bytes"]
        opt.step()
        opt.zero_grad(set_to_none=True)
    state = sum(t.nbytes for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    assert m.budget_bytes - before >= state * share / 100 * 0.999, (m.budget_bytes - before, state)


def test_the_head_turning_to_chunks_is_told_only_of_a_budget_accepted():
    """chunked_loss=None warns that the head runs in chunks when a budget
    that needs them is accepted; a budget refused (below even the chunked
    least) leaves no Module, and no warning of one."""
    import warnings

    inputs = batch(length=64)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(memtrain.Infeasible) as refused:
            memtrain.Module(llama(), budget=1 << 20, sample=inputs)
    assert [str(w.message) for w in seen if "chunks from now on" in str(w.message)] == []
    least = refused.value.min_bytes
    del refused
    gc.collect()
    with pytest.warns(UserWarning, match="chunks from now on") as seen:
        m = memtrain.Module(llama(), budget=int(least * 1.02), sample=inputs)
    assert len([w for w in seen if "chunks from now on" in str(w.message)]) == 1
    assert seen[0].filename == __file__  # it points at the caller's line
    m(**inputs).loss.backward()
    assert m.last_step["chunked_loss"]


@pytest.mark.parametrize("given", [False, True], ids=["optimizer-not-given", "optimizer-given"])
def test_a_least_stated_without_the_optimizer_says_what_it_leaves_out(given):
    """A refusal at construction without optimizer= names the state an
    Adam would add (2 x the trainable parameters' bytes) and the route to
    a least that counts it; with optimizer= the least counts it already,
    and the refusal says nothing of it."""
    model = llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if given else None
    with pytest.raises(memtrain.Infeasible) as refused:
        memtrain.Module(model, budget=1, sample=batch(length=64), optimizer=opt)
    text = str(refused.value)
    state = 2 * sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    assert ("counts no optimizer's state" in text) == (not given), text
    if not given:
        assert f"{state:.1f} MiB for this model" in text and "optimizer=opt" in text, text
    assert refused.value.min_bytes > 1


def tied_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=True)
    return transformers.LlamaForCausalLM(config)


@pytest.mark.parametrize("make", [gpt2, tied_llama, llama])
def test_at_the_least_with_chunks_left_to_memtrain_every_micro_step_trains(make):
    """The least budget where the head turns to chunks, AdamW given, 4
    micro-batches of lengths changing each: the steps whose whole logits
    fit run the model's own head, whose gradient (a tied head's summed with
    the embeddings' out of place) ends the step with more than a chunked
    one. The least counts it: no step is refused, none passes the budget."""
    g = torch.Generator().manual_seed(1)
    lengths = [128, 16, 112, 61, 97, 25, 113, 102, 91, 98, 128, 115]
    data = [torch.randint(0, VOCAB, (2, n), generator=g) for n in lengths]
    sample = {"input_ids": data[0], "labels": data[0]}

    def wrap(budget):
        model = make()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        return memtrain.Module(model, budget=budget, sample=sample, optimizer=opt, keeps_output=False), opt

    try:
        wrap(1)
    except memtrain.Infeasible as refused:  # let go at the end of `except`, with the refused model
        least = refused.min_bytes
    gc.collect()
    with pytest.warns(UserWarning, match="run in chunks"):
        m, opt = wrap(least)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for k in range(0, len(data), 4):
            memtrain.reset_peak()
            for ids in data[k:k + 4]:
                loss = m(input_ids=ids, labels=ids).loss  # the output goes at once, its loss stays
                (loss / 4).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            assert memtrain.memory_stats()["peak_bytes"] <= m.budget_bytes
    # The loop lets the output go, as keeps_output=False says: only its loss
    # (all a chunked head's output holds) is alive at the backward.
    assert not [w for w in seen if "keeps the model's output" in str(w.message)]


@pytest.mark.parametrize("make, turns_at, weights", [(gpt2, 1, "device"), (llama, 1, "device"), (gpt2, 2, "device"),
                                                     (llama, 1, "host")])
def test_the_head_turning_to_chunks_mid_update_keeps_the_gradients_accumulated(make, turns_at, weights):
    """Micro-batches accumulated into one update, the head turning to
    chunks at micro-batch `turns_at` (counted from 0): the Module measures
    its sample again there, with the earlier micro-batches' gradients in
    every parameter, the blocks' among them. They are put back after the
    measurement: the update's gradients are the plain loop's (those of the
    chunked micro-batch within the chunked loss's tolerance), the blocks'
    weights on the device or in host memory."""
    short, long = batch(length=16), batch(length=64, seed=1)
    data = [batch(length=16, seed=2 + k) for k in range(turns_at)] + [long]
    # The whole logits of the short ones fit, the long one's do not.
    least = memtrain.least_budget(make(), short, chunked_loss=False, weights=weights)
    gc.collect()
    model = make()
    m = memtrain.Module(model, budget=least + (3 << 20), sample=short, weights=weights)
    turned = []
    for k, inputs in enumerate(data):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m(**inputs).loss.backward()
        if any("run in chunks" in str(w.message) for w in seen):
            turned.append(k)
        assert m.last_step["chunked_loss"] is (k == turns_at), f"micro-batch {k}"
    assert turned == [turns_at]
    grads = [p.grad.clone() for p in model.parameters()]
    m.unwrap()
    del m, model
    gc.collect()
    plain = make()
    for inputs in data:
        plain(**inputs).loss.backward()
    for (name, q), g in zip(plain.named_parameters(), grads):
        assert ((g - q.grad).abs().max() / q.grad.abs().max()).item() <= TOLERANCE, name


def test_a_refusal_after_the_head_turns_to_chunks_names_one_least():
    """Adam's state, counted at its first update, passes a budget that the
    head in chunks cannot bring back under (a short input: its logits are
    small beside the state): the refusal names the least with chunks, the
    least there is, with no refusal of the whole logits chained to it (it
    would name another); at that least the same step runs within it."""
    sample = {"input_ids": batch(length=16)["input_ids"], "labels": batch(length=16)["labels"]}
    least = memtrain.least_budget(gpt2(), sample, chunked_loss=False)
    gc.collect()
    model = gpt2()
    m = memtrain.Module(model, budget=least, sample=sample)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    m(**sample).loss.backward()
    try:
        opt.step()  # its first update, checked: refused at the least without its state
    except memtrain.Infeasible as update:
        m.budget = update.min_bytes  # the least the update itself needs
    opt.step()
    opt.zero_grad(set_to_none=True)
    longer = batch(length=64)  # its whole logits pass the budget, and in chunks too
    with pytest.raises(memtrain.Infeasible) as refused:
        m(**longer).loss.backward()
    shown = "".join(traceback.format_exception(refused.value))  # as the user's loop would print it
    assert shown.count("memtrain.Infeasible") == 1, shown
    assert "in chunks" in str(refused.value), str(refused.value)
    assert refused.value.min_bytes > least
    m.budget = refused.value.min_bytes
    del refused
    gc.collect()
    memtrain.reset_peak()
    m(**longer).loss.backward()
    assert m.last_step["chunked_loss"]
    assert memtrain.memory_stats()["peak_bytes"] <= m.budget_bytes
