"""memtrain.Module on models whose blocks PyTorch's FSDP2 shards
(torch.distributed.fsdp.fully_shard), over Gloo in 2 and 4 processes: each
rank's losses and gradient shards (after FSDP2's reduce-scatter) equal to
those of the same FSDP2 model without memtrain, bit for bit, dropout
included, while each rank plans its own input sizes under its own budget."""

import hashlib
import os
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

fsdp = pytest.importorskip("torch.distributed.fsdp")


def shard_digests(model):
    """The SHA-256 of each parameter's gradient on this rank: its shard."""
    out = []
    for p in model.parameters():
        g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
        out.append(hashlib.sha256(g.detach().contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest())
    return out


def sharded(model, blocks_of, root, mixed=False):
    """`model` with FSDP2 on its blocks (and root); `mixed`: gathered and
    computed in bfloat16, gradients reduced in float32."""
    policy = fsdp.MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
    options = {"mp_policy": policy} if mixed else {}
    for block in blocks_of(model):
        fsdp.fully_shard(block, **options)
    if root:
        fsdp.fully_shard(model, **options)
    return model


def logits_of(output):
    return output.logits if hasattr(output, "logits") else output


def rank_batches(rank, steps, vocab):
    """Each rank its own lengths, far apart: ranks' plans differ."""
    g = torch.Generator().manual_seed(10 + rank)
    low, high = (12, 24) if rank % 2 == 0 else (40, 56)
    return [torch.randint(0, vocab, (8, int(torch.randint(low, high, (1,), generator=g))), generator=g)
            for _ in range(steps)]


def routed_batches(rank, steps, vocab):
    """Lengths alike on every rank; from step 4 on, rank 1's tokens all go
    to the wide expert of models.RoutedGPT, as its sample's never did, and
    rank 0 repeats the lengths of its steps 2 and 3, planned then. (A
    length planned anew may leave a few hundred bytes below the budget; a
    block measured 2% above its prediction, as a collective's buffer freed
    late under load makes it, then re-plans rightly, on noise alone.)"""
    g = torch.Generator().manual_seed(10 + rank)
    out, lengths = [], []
    for step in range(steps):
        length = int(torch.randint(80, 96, (1,), generator=g))
        length = lengths[2 + step % 2] if rank == 0 and step >= 4 else length
        lengths.append(length)
        low, high = (vocab // 2, vocab) if rank == 1 and step >= 4 else (0, vocab // 2)
        out.append(torch.randint(low, high, (8, length), generator=g))
    return out


def run_rank(rank, memtrain, models, case):
    make, blocks_of = {"gpt": (lambda: models.MaskedGPT(layers=4), lambda m: m.blocks),
                       "routed": (lambda: models.RoutedGPT(layers=4), lambda m: m.blocks),
                       "llama": (lambda: models.llama(layers=4), lambda m: m.model.layers)}[case["model"]]
    plain = sharded(make(), blocks_of, case["root"], case.get("mixed", False))
    inner = sharded(make(), blocks_of, case["root"], case.get("mixed", False))
    vocab = 500 if case["model"] == "llama" else 300
    routed = case["model"] == "routed"
    sample = torch.randint(0, vocab // 2, (8, 96)) if routed else torch.randint(0, vocab, (8, 56))
    if case["model"] == "llama":
        sample = {"input_ids": sample, "use_cache": False}
    opts = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in (plain, inner)]
    wrapped = memtrain.Module(inner, budget=case["budget"], blocks=blocks_of(inner), planner=case["planner"],
                              sample=sample, optimizer=opts[1], collect_steps=2)
    out = []
    for step, ids in enumerate((routed_batches if routed else rank_batches)(rank, case.get("steps", 6), vocab)):
        losses, grads = [], []
        for model, opt in zip((plain, wrapped), opts):
            torch.manual_seed(100 * step + rank)  # the same dropout draws for both
            opt.zero_grad(set_to_none=True)
            output = model(ids, use_cache=False) if case["model"] == "llama" else model(ids)
            loss = F.cross_entropy(logits_of(output).flatten(0, 1).float(), ids.flatten())
            loss.backward()
            losses.append(loss.item())
            grads.append(shard_digests(plain if model is plain else inner))
            opt.step()
        s = wrapped.last_step
        out.append({"loss": losses[0] == losses[1], "grads": grads[0] == grads[1], "plan": s["plan"],
                    "schedule": s["schedule"], "within": s["peak_bytes"] <= s["budget_bytes"],
                    "length": ids.shape[1], "replans": s["replans"], "peak": s["peak_bytes"],
                    "predicted": s["predicted_peak_bytes"]})
    return out


def rank_main(rank, world, store_file, case, results):
    sys.path.insert(0, os.path.dirname(__file__))
    import memtrain
    import models
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=world)
    try:
        results.put((rank, run_rank(rank, memtrain, models, case)))
    except Exception as e:  # the test reports it; a rank that dies silently would hang it
        results.put((rank, f"rank {rank} failed: {e!r}"))
    finally:
        dist.destroy_process_group()


def run_world(world, case, tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, world, str(tmp_path / "store"), case, results))
             for r in range(world)]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in range(world):
            rank, out = results.get(timeout=300)
            got[rank] = out
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    for p in procs:
        assert p.exitcode == 0
    return got


CASES = [
    (2, {"model": "gpt", "root": False, "planner": "mimose", "budget": "70%"}),
    (2, {"model": "llama", "root": True, "planner": "optimal", "budget": "70%"}),
    (4, {"model": "gpt", "root": True, "planner": "optimal", "budget": "70%"}),
    (4, {"model": "llama", "root": False, "planner": "mimose", "budget": "70%"}),
    (2, {"model": "gpt", "root": True, "planner": "optimal", "budget": "70%", "mixed": True}),
]


@pytest.mark.parametrize("world,case", CASES, ids=[f"{w}ranks-{c['model']}-{c['planner']}"
                                                   f"{'-root' if c['root'] else ''}{'-bf16' if c.get('mixed') else ''}"
                                                   for w, c in CASES])
def test_fsdp2_ranks_give_the_gradients_of_fsdp2_alone(world, case, tmp_path):
    got = run_world(world, case, tmp_path)
    for rank, out in sorted(got.items()):
        assert not isinstance(out, str), out
        for step, s in enumerate(out):
            assert s["loss"], f"rank {rank} step {step}: the loss differs from FSDP2's without memtrain"
            assert s["grads"], f"rank {rank} step {step}: a gradient shard differs from FSDP2's without memtrain"
            assert s["within"], f"rank {rank} step {step} (length {s['length']}) went over its budget: {s}"
        # The budget made the planned steps recompute, and only a block
        # right before its own backward (its weights gathered then).
        assert any(op.startswith("Fck") for s in out[2:] for op in s["schedule"]), out
    # Each rank planned its own sizes: short and long ranks ran different schedules.
    planned = [[s["schedule"] for s in got[r][2:]] for r in range(world)]
    assert planned[0] != planned[1]


def test_a_rank_whose_blocks_outgrow_their_plan_replans_alone(tmp_path):
    # From step 4 on, rank 1's blocks hold far more than its sample's did
    # (each token to the wide expert): kept as planned, its step would pass
    # the budget. It re-plans the blocks still to come, alone; rank 0 runs
    # its plans; the collectives stay in step and nothing changes a bit.
    case = {"model": "routed", "root": True, "planner": "optimal", "budget": "85%", "steps": 7}
    got = run_world(2, case, tmp_path)
    for rank, out in sorted(got.items()):
        assert not isinstance(out, str), out
        for step, s in enumerate(out):
            assert s["loss"] and s["grads"], f"rank {rank} step {step} differs from FSDP2's without memtrain"
            assert s["within"], f"rank {rank} step {step} went over its budget: {s}"
    wide, narrow = got[1][4:], got[0][4:]
    replanned = [s for s in wide if s["replans"] > 0]
    assert replanned, wide
    # Their blocks outgrew the prediction of the schedule they ended with by
    # a tenth and more (17-27% measured), and still fit.
    assert all(s["peak"] > 1.1 * s["predicted"] for s in replanned), replanned
    # The narrow rank's blocks hold what was planned: its peaks within 5% of
    # the prediction (0.6-1.6% measured). It may still re-plan a block on
    # noise: gloo's thread frees a collective's buffer late under load.
    assert all(s["peak"] <= 1.05 * s["predicted"] for s in narrow), [(s["peak"], s["predicted"]) for s in narrow]


def test_a_planner_that_recomputes_across_blocks_is_refused_on_sharded_blocks(tmp_path):
    sys.path.insert(0, os.path.dirname(__file__))
    import memtrain
    import models
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = sharded(models.MaskedGPT(layers=4), lambda m: m.blocks, root=False)
        with pytest.raises(memtrain.UsageError, match=r"planner sqrt recomputes .*FSDP2.*expected one of: .*mimose"):
            memtrain.Module(model, budget="60%", planner="sqrt")
    finally:
        dist.destroy_process_group()


def fault_rank(rank, world, store_file, how, results):
    """Rank 1 dies (or stops) in block 2's backward of step 3, or its step
    3 is too long for its budget ("infeasible"); each rank reports what it
    raised."""
    sys.path.insert(0, os.path.dirname(__file__))
    import datetime
    import signal
    import memtrain
    import models
    torch.set_num_threads(1)
    # The process group's timeout is the user's: how long a stopped rank is waited for.
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=10))
    model = sharded(models.MaskedGPT(layers=4), lambda m: m.blocks, root=True)
    opt = torch.optim.Adam(model.parameters())
    wrapped = memtrain.Module(model, budget="70%", blocks=model.blocks, planner="optimal",
                              sample=torch.randint(0, 300, (8, 56)), optimizer=opt, collect_steps=2)
    step = 0

    def fail(*_):
        if rank == 1 and step == 3:
            if how == "killed":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGSTOP)

    model.blocks[2].register_full_backward_pre_hook(fail)
    try:
        for step in range(5):
            ids = torch.randint(0, 300, (8, 40))
            if how == "infeasible" and rank == 1 and step == 3:
                ids = torch.randint(0, 300, (256, 56))
            loss = F.cross_entropy(wrapped(ids).flatten(0, 1), ids.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        results.put((rank, "finished"))
    except memtrain.RankFailure as e:
        results.put((rank, ("RankFailure", e.rank, str(e), step)))
    except Exception as e:
        results.put((rank, (type(e).__name__, None, str(e), step)))


def run_faulty(how, tmp_path):
    """What rank 0 raised, and rank 1 when it said."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=fault_rank, args=(r, 2, str(tmp_path / "store"), how, results)) for r in range(2)]
    for p in procs:
        p.start()
    got = {}
    try:
        # Within the process group's timeout (10 s) and the diagnosis, not the default 30 minutes.
        while 0 not in got:
            rank, out = results.get(timeout=120)
            got[rank] = out
    finally:
        for p in procs:
            p.kill()
            p.join(timeout=30)
    return got


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_rank_that_dies_mid_step_is_named_by_the_others(how, tmp_path):
    kind, blamed, message, step = run_faulty(how, tmp_path)[0]
    assert (kind, blamed, step) == ("RankFailure", 1, 3), message
    assert message.startswith("rank 0 of 2: a collective in ") and "rank 1 died or stopped" in message, message


def test_a_rank_whose_step_cannot_fit_tells_the_others_why(tmp_path):
    got = run_faulty("infeasible", tmp_path)
    assert got[1][0] == "Infeasible" and got[1][3] == 3, got[1]
    kind, blamed, message, step = got[0]
    assert (kind, blamed) == ("RankFailure", 1), message
    assert "because rank 1 gave up: micro-step " in message and "needs at least" in message, message


def resume_rank(rank, world, store_file, checkpoint, phase, results):
    """Steps 0..5 whole ("whole"), or 0..2 then a checkpoint ("first"), or
    the checkpoint loaded in fresh processes then 3..5 ("rest"); puts the
    rank's parameter shards' digests."""
    sys.path.insert(0, os.path.dirname(__file__))
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    import memtrain
    import models
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=world)
    try:
        model = sharded(models.MaskedGPT(layers=4), lambda m: m.blocks, root=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        wrapped = memtrain.Module(model, budget="70%", blocks=model.blocks, planner="optimal",
                                  sample=torch.randint(0, 300, (8, 56)), optimizer=opt, collect_steps=2)
        if phase == "rest":
            state = dict(zip(("model", "optim"), get_state_dict(model, opt)))
            dcp.load(state, checkpoint_id=checkpoint)
            set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        batches = rank_batches(rank, 6, 300)
        for step in {"whole": range(6), "first": range(3), "rest": range(3, 6)}[phase]:
            torch.manual_seed(100 * step + rank)
            ids = batches[step]
            loss = F.cross_entropy(wrapped(ids).flatten(0, 1), ids.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if phase == "first":
            model_state, optim_state = get_state_dict(model, opt)
            dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=checkpoint)
        shards = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
        results.put((rank, [hashlib.sha256(s.detach().contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()
                            for s in shards]))
    except Exception as e:  # the test reports it; a rank that dies silently would hang it
        results.put((rank, f"rank {rank} failed: {e!r}"))
    finally:
        dist.destroy_process_group()


def run_phase(phase, tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    store = tmp_path / f"store-{phase}"
    procs = [ctx.Process(target=resume_rank, args=(r, 2, str(store), str(tmp_path / "checkpoint"), phase, results))
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        got = dict(results.get(timeout=300) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    for rank, out in got.items():
        assert not isinstance(out, str), out
    return got


def test_resuming_from_a_distributed_checkpoint_gives_the_weights_of_a_run_that_never_stopped(tmp_path):
    whole = run_phase("whole", tmp_path)
    run_phase("first", tmp_path)
    resumed = run_phase("rest", tmp_path)
    assert resumed == whole
