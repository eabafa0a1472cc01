"""Several processes, each a memtrain.Module, sharing one budget through a
job group: each trains as the plain model does, bit for bit, their bytes
together never pass the group's budget, and a process killed mid-training
gives its bytes back while the others go on."""

import copy
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import uuid

import pytest
import torch

import memtrain
from memtrain import _job_group

# Of the two jobs' plain steps together: less than both at once, more than
# one at its least beside the other's weights, gradients and AdamW state.
BUDGET = "90%"
WORKER = os.path.join(os.path.dirname(__file__), "job_group_worker.py")


def start(mode, name, seed, tmp_path):
    out = tmp_path / f"{mode}-{seed}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, WORKER, mode, name, str(seed), str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    return p, out


def finish(p, out, timeout=600):
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError(f"worker {p.args[2:4]} did not finish in {timeout} s:\n{p.communicate()[1][-3000:]}")
    assert p.returncode == 0, f"worker failed ({p.returncode}):\n{stderr[-3000:]}"
    return json.loads(out.read_text())


def group_name():
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """Each seed's run on the plain model, alone."""
    tmp = tmp_path_factory.mktemp("plain")
    runs = {seed: start("plain", "-", seed, tmp) for seed in (1, 2)}
    return {seed: finish(*run) for seed, run in runs.items()}


# (policy, each job's mode): share-host keeps its blocks' weights in host
# memory, its part of the group its plain step simulated with every weight
# on the device.
GROUPS = [("fcfs", ("share", "share")), ("arbiter", ("share", "share")), ("fcfs", ("share-host", "share")),
          ("fcfs", ("share-host", "share-host"))]


@pytest.mark.parametrize("policy,modes", GROUPS, ids=[f"{p}-{'-'.join(m)}" for p, m in GROUPS])
def test_jobs_sharing_a_budget_train_as_the_plain_model_within_it(plain, tmp_path, policy, modes):
    name = group_name()
    with memtrain.JobGroup(name, budget=BUDGET, policy=policy, jobs=2) as group:
        jobs = [start(mode, name, seed, tmp_path) for mode, seed in zip(modes, (1, 2))]
        results = {seed: finish(*job) for seed, job in zip((1, 2), jobs)}
        state = group.wait(timeout=60)
    for seed in (1, 2):
        assert results[seed]["losses"] == plain[seed]["losses"], f"job {seed}'s losses"
        assert results[seed]["weights"] == plain[seed]["weights"], f"job {seed}'s weights"
    budget = state["budget_bytes"]
    assert budget is not None and state["max_live_bytes"] <= budget, state
    # The two plain steps cannot run at once: the leases share the budget.
    references = [m["reference_bytes"] for m in state["members"]]
    assert budget < sum(references), state
    for seed in (1, 2):
        assert all(b <= budget for b in results[seed]["budgets"]), "a step's lease is within the group's budget"
    assert [m["status"] for m in state["members"]] == ["finished", "finished"], state
    assert [m["steps"] for m in state["members"]] == [6, 6], state


def test_jobs_leasing_each_other_short_in_an_llm_loop_finish_within_the_budget(tmp_path):
    # A job whose head turns to chunks mid-training plans its steps afresh:
    # the old steps' lease must settle before the new steps ask for theirs,
    # or the group counts both and the jobs wait on each other for ever.
    name = group_name()
    with memtrain.JobGroup(name, budget="80%", policy="fcfs", jobs=2) as group:
        jobs = [start("share-llm", name, seed, tmp_path) for seed in (0, 1)]
        results = [finish(*job, timeout=240) for job in jobs]
        state = group.wait(timeout=60)
    for r in results:
        assert len(r["losses"]) == 24 and all(r["within"]), r
    assert state["max_live_bytes"] <= state["budget_bytes"], state
    assert [m["status"] for m in state["members"]] == ["finished", "finished"], state


def test_a_killed_job_gives_its_bytes_back_and_the_others_go_on(plain, tmp_path):
    name = group_name()
    with memtrain.JobGroup(name, budget=BUDGET, policy="fcfs", jobs=2) as group:
        killed, _ = start("share", name, 1, tmp_path)
        survivor = start("share", name, 2, tmp_path)
        for line in killed.stdout:
            if line.strip() == "step 2":
                break
        else:
            pytest.fail(f"the job to kill never reached its second step: {killed.communicate()[1][-3000:]}")
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
        result = finish(*survivor)
        state = group.wait(timeout=60)
    assert result["losses"] == plain[2]["losses"]
    assert result["weights"] == plain[2]["weights"]
    by_status = {m["status"]: m for m in state["members"]}
    assert set(by_status) == {"gone", "finished"}, state
    assert by_status["gone"]["reclaimed_bytes"] > 0, "the killed job held its model, which the group took back"
    assert state["live_bytes"] == 0, state


# Bytes, not N%: a share is of the starting jobs' plain steps, and here one
# starts. About 90% of two jobs' plain steps, as BUDGET is above.
LATE_BUDGET = "236MiB"


def test_a_job_joining_a_group_already_training_is_leased_beside_it(plain, tmp_path):
    name = group_name()
    with memtrain.JobGroup(name, budget=LATE_BUDGET, policy="fcfs", jobs=1) as group:
        first = start("share-then-wait", name, 1, tmp_path)
        for line in first[0].stdout:
            if line.strip() == "step 2":
                break
        else:
            pytest.fail(f"the first job never reached its second step: {first[0].communicate()[1][-3000:]}")
        late = start("share", name, 2, tmp_path)  # the first waits for it to join, then goes on
        results = {1: finish(*first), 2: finish(*late)}
        state = group.wait(timeout=60)
    for seed in (1, 2):
        assert results[seed]["losses"] == plain[seed]["losses"], f"job {seed}'s losses"
        assert results[seed]["weights"] == plain[seed]["weights"], f"job {seed}'s weights"
    assert state["max_live_bytes"] <= state["budget_bytes"], state
    for seed in (1, 2):
        assert all(b <= state["budget_bytes"] for b in results[seed]["budgets"]), state
    assert [m["status"] for m in state["members"]] == ["finished", "finished"], state
    assert [m["steps"] for m in state["members"]] == [6, 6], state


WAITING_JOB = """
import torch, memtrain
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(3)])
memtrain.Module(model, share={name!r}, sample=torch.zeros(4, 16))
print("started", flush=True)
"""


def test_a_job_waiting_for_the_others_says_so_and_stops_at_ctrl_c():
    name = group_name()
    with memtrain.JobGroup(name, budget="1GiB", jobs=2):
        job = subprocess.Popen([sys.executable, "-c", WAITING_JOB.format(name=name)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        deadline = threading.Timer(60, job.kill)  # a job that never says it waits fails, not hangs
        deadline.start()
        seen = ""
        for line in job.stderr:
            seen += line
            if "starts when its 2 starting jobs have measured" in line:
                break
        else:
            pytest.fail(f"the waiting job said nothing: {seen[-3000:]}")
        assert "1 have after" in line and "jobs=" in line, line
        job.send_signal(signal.SIGINT)
        stdout, stderr = job.communicate(timeout=60)
        deadline.cancel()
    assert job.returncode != 0 and "started" not in stdout
    assert "KeyboardInterrupt" in stderr, stderr[-3000:]


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(3)])


def test_a_group_that_is_not_there_is_named(monkeypatch):
    monkeypatch.setattr(_job_group, "JOIN_TIMEOUT_SECONDS", 0.2)
    name = group_name()
    with pytest.raises(memtrain.UsageError, match=f"share='{name}'.*memtrain.JobGroup"):
        memtrain.Module(small_model(), share=name, sample=torch.zeros(4, 16))


def test_share_takes_no_budget_and_needs_a_sample():
    with pytest.raises(memtrain.UsageError, match="give the budget to the group"):
        memtrain.Module(small_model(), budget="50%", share="x", sample=torch.zeros(4, 16))
    with pytest.raises(memtrain.UsageError, match="share='x' needs sample="):
        memtrain.Module(small_model(), share="x")
    with pytest.raises(memtrain.UsageError, match="budget is required"):
        memtrain.Module(small_model())
    with pytest.raises(memtrain.UsageError, match="not a job group's name"):
        memtrain.Module(small_model(), share=3, sample=torch.zeros(4, 16))


def test_a_job_alone_in_its_group_trains_and_its_budget_is_the_groups():
    name = group_name()
    with memtrain.JobGroup(name, budget="100%", policy="static", jobs=1) as group:
        m = memtrain.Module(small_model(), share=name, sample=torch.zeros(8, 16))
        assert m.job_group.name == name
        with pytest.raises(memtrain.UsageError, match="the group's lease"):
            m.budget = "50%"
        with pytest.raises(memtrain.UsageError, match=f"deepcopy of a memtrain.Module in job group {name}"):
            copy.deepcopy(m)
        for rows in (8, 4, 6):
            m(torch.randn(rows, 16)).sum().backward()
            assert m.last_step["budget_bytes"] <= group.state()["budget_bytes"]
            assert m.last_step["lease_want_bytes"] > 0
        # The last step's lease covers the loop's update after it, until the next step or the end.
        assert group.state()["members"][0]["steps"] == 2
        del m
        gc.collect()
        member = group.state()["members"][0]
        assert (member["status"], member["steps"]) == ("finished", 3)


@pytest.mark.parametrize("kwargs, match", [
    ({"policy": "lifo"}, "policy"),
    ({"jobs": 0}, "jobs 0 is out of range"),
    ({"jobs": True}, "not a number of processes"),
    ({"device": "cuda"}, "not supported for sharing"),
    ({"budget": "0%"}, "budget"),
])
def test_a_group_is_refused_with_what_would_be_valid(kwargs, match):
    arguments = {"name": group_name(), "budget": "50%", **kwargs}
    with pytest.raises(memtrain.UsageError, match=match):
        memtrain.JobGroup(**arguments)


def test_a_name_taken_by_a_live_group_is_refused():
    name = group_name()
    with memtrain.JobGroup(name, budget="1GiB"):
        with pytest.raises(memtrain.UsageError):
            memtrain.JobGroup(name, budget="1GiB")
